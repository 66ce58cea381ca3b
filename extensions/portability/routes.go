package portability

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/keelhq/keel/sdk"
)

// msgServerPaths refuses server directories to callers who are not instance admins: a path
// on the server reads or writes whatever the keel process can.
const msgServerPaths = "Only instance admins may export to or import from a server path"

// longRoute is the request bound of exports and imports, which read or write a whole company.
const longRoute = 60 * 60

func init() {
	const base = "/api/companies/{companyId}"
	addRoutes(
		route{Method: http.MethodPost, Path: base + "/exports/preview", Access: sdk.AccessBoard, Permission: "agents:create", CompanyFromPath: true, Body: ExportBody{},
			Response: new(ExportPreview), Summary: "Preview a company export package: the files and counts per group (default groups company and agents)",
			Handle: (*Portability).handleExportPreview},
		route{Method: http.MethodPost, Path: base + "/exports", Access: sdk.AccessBoard, Permission: "agents:create", CompanyFromPath: true, Body: ExportBody{},
			Response: new(ExportResult), TimeoutSec: longRoute, Summary: "Export a company package: markdown files, manifest.json and content-addressed attachments " +
				"(inline, as a zip, or written to a server directory)",
			Handle: (*Portability).handleExport},
		route{Method: http.MethodPost, Path: base + "/imports/preview", Access: sdk.AccessBoard, Permission: "agents:create", CompanyFromPath: true,
			Body: ImportBody{}, Response: new(ImportPreview), TimeoutSec: longRoute, Errors: []int{http.StatusConflict, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge},
			Summary: "Preview a package import from a local directory, a zip or a forge repository: the plan per collision mode, attachments verified",
			Handle:  (*Portability).handleImportPreview},
		route{Method: http.MethodPost, Path: base + "/imports/apply", Access: sdk.AccessBoard, Permission: "agents:create", CompanyFromPath: true,
			Body: ImportBody{}, Response: new(ImportResult), TimeoutSec: longRoute, Errors: []int{http.StatusConflict, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge},
			Summary: "Import a package into the company (rename, skip or replace on collisions; agents imported with timer heartbeats off)",
			Handle:  (*Portability).handleImportApply},
	)
}

// ExportBody is the body of the export routes.
type ExportBody struct {
	// Include lists groups: company, agents, projects, issues (alias tasks), skills. Default company and agents.
	Include []string `json:"include,omitempty"`
	// Format is files (default: the files inline) or zip (a base64 zip archive).
	Format string `json:"format,omitempty" jsonschema:"enum=files,enum=zip"`
	// OutputPath, when set, is an absolute directory on the server the package is written to instead.
	OutputPath string `json:"outputPath,omitempty"`
}

// ExportPreview is the export preview's answer.
type ExportPreview struct {
	Include  []string       `json:"include"`
	Manifest *Manifest      `json:"manifest"`
	Files    []string       `json:"files"`
	Counts   map[string]int `json:"counts"`
	Warnings []string       `json:"warnings"`
}

// ExportResult is the export's answer: files maps each path to its text, or to
// {encoding: base64, data} for binary files.
type ExportResult struct {
	RootPath   string         `json:"rootPath"`
	Manifest   *Manifest      `json:"manifest"`
	Files      map[string]any `json:"files,omitempty"`
	Zip        string         `json:"zip,omitempty"`
	OutputPath string         `json:"outputPath,omitempty"`
	Counts     map[string]int `json:"counts"`
	Warnings   []string       `json:"warnings"`
}

// ImportBody is the body of the import routes.
type ImportBody struct {
	// Source is a local path (directory or .zip), a forge URL or owner/repo[/path], or
	// {type: local|zip|forge|inline, path?, data?, url?, ref?, files?}. Generic HTTP URLs are refused.
	Source *Source `json:"source" jsonschema:"required"`
	// Include limits the groups imported (default every group of the package).
	Include []string `json:"include,omitempty"`
	// CollisionStrategy is rename (default), skip or replace.
	CollisionStrategy string `json:"collisionStrategy,omitempty" jsonschema:"enum=rename,enum=skip,enum=replace"`
}

// ImportPreview is the import preview's answer.
type ImportPreview struct {
	Source            *resolvedSource `json:"source"`
	Include           []string        `json:"include"`
	CollisionStrategy string          `json:"collisionStrategy"`
	Manifest          *Manifest       `json:"manifest"`
	Plan              *Plan           `json:"plan"`
	Warnings          []string        `json:"warnings"`
}

// ImportResult is the import's answer: the plan with the ids written and counts per group.
type ImportResult struct {
	CompanyID         string          `json:"companyId"`
	Source            *resolvedSource `json:"source"`
	Include           []string        `json:"include"`
	CollisionStrategy string          `json:"collisionStrategy"`
	Plan              *Plan           `json:"plan"`
	Progress          map[string]int  `json:"progress"`
	Warnings          []string        `json:"warnings"`
}

func (x *Portability) readExport(rw http.ResponseWriter, r *http.Request) (*ExportBody, map[string]bool, bool) {
	body := &ExportBody{}
	if err := sdk.DecodeJSON(r, body); err != nil {
		x.writeErr(rw, err)
		return nil, nil, false
	}
	groups, err := readGroups("include", body.Include)
	if err != nil {
		x.writeErr(rw, err)
		return nil, nil, false
	}
	if len(groups) == 0 {
		groups = defaultExport
	}
	switch body.Format {
	case "", "files", "zip":
	default:
		x.writeErr(rw, sdk.ValidationError(sdk.ValidationDetail{Path: "format", Message: "must be files or zip"}))
		return nil, nil, false
	}
	if body.OutputPath != "" && !filepath.IsAbs(body.OutputPath) {
		x.writeErr(rw, sdk.ValidationError(sdk.ValidationDetail{Path: "outputPath", Message: "must be an absolute path"}))
		return nil, nil, false
	}
	if body.OutputPath != "" && !sdk.ActorFrom(r.Context()).IsInstanceAdmin {
		x.writeErr(rw, sdk.Forbidden(msgServerPaths))
		return nil, nil, false
	}
	include := map[string]bool{}
	for _, g := range groups {
		include[g] = true
	}
	return body, include, true
}

func (x *Portability) handleExportPreview(rw http.ResponseWriter, r *http.Request) {
	companyID := r.PathValue("companyId")
	_, include, ok := x.readExport(rw, r)
	if !ok {
		return
	}
	ex, err := x.export(r.Context(), companyID, include)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, &ExportPreview{Include: ex.manifest.Include, Manifest: ex.manifest, Files: ex.pkg.paths(),
		Counts: ex.counts, Warnings: nonNil(ex.warnings)})
}

func (x *Portability) handleExport(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	body, include, ok := x.readExport(rw, r)
	if !ok {
		return
	}
	ex, err := x.export(ctx, companyID, include)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	out := &ExportResult{RootPath: slugify(ex.manifest.Source.CompanyName), Manifest: ex.manifest, Counts: ex.counts, Warnings: nonNil(ex.warnings)}
	switch {
	case body.OutputPath != "":
		if err := writeDir(body.OutputPath, ex.pkg); err != nil {
			x.writeErr(rw, sdk.Unprocessable(err.Error()))
			return
		}
		out.OutputPath = body.OutputPath
	case body.Format == "zip":
		b, err := zipPkg(out.RootPath, ex.pkg)
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		out.Zip = base64.StdEncoding.EncodeToString(b)
	default:
		out.Files = map[string]any{}
		for name, b := range ex.pkg.files {
			if utf8.Valid(b) && !isAsset(name) {
				out.Files[name] = string(b)
			} else {
				out.Files[name] = map[string]string{"encoding": "base64", "data": base64.StdEncoding.EncodeToString(b)}
			}
		}
	}
	x.activity(r, companyID, "company.exported", map[string]any{"include": ex.manifest.Include, "counts": ex.counts})
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// readImport decodes an import body, loads the package and parses it (every attachment
// verified); nothing is written.
func (x *Portability) readImport(rw http.ResponseWriter, r *http.Request) (*ImportBody, *parsed, *resolvedSource, string, bool) {
	body := &ImportBody{}
	if err := sdk.DecodeJSON(r, body); err != nil {
		x.writeErr(rw, err)
		return nil, nil, nil, "", false
	}
	if body.Source == nil {
		x.writeErr(rw, sdk.ValidationError(sdk.ValidationDetail{Path: "source", Message: "is required"}))
		return nil, nil, nil, "", false
	}
	groups, err := readGroups("include", body.Include)
	if err != nil {
		x.writeErr(rw, err)
		return nil, nil, nil, "", false
	}
	mode, err := readCollision(body.CollisionStrategy)
	if err != nil {
		x.writeErr(rw, err)
		return nil, nil, nil, "", false
	}
	if body.Source.Type == "local" && !sdk.ActorFrom(r.Context()).IsInstanceAdmin {
		x.writeErr(rw, sdk.Forbidden(msgServerPaths))
		return nil, nil, nil, "", false
	}
	p, src, err := x.load(r.Context(), body.Source)
	if err != nil {
		x.writeErr(rw, err)
		return nil, nil, nil, "", false
	}
	pr, err := parsePackage(p, groups)
	if err != nil {
		x.writeErr(rw, err)
		return nil, nil, nil, "", false
	}
	return body, pr, src, mode, true
}

func (x *Portability) handleImportPreview(rw http.ResponseWriter, r *http.Request) {
	companyID := r.PathValue("companyId")
	_, pr, src, mode, ok := x.readImport(rw, r)
	if !ok {
		return
	}
	pl, _, err := x.plan(r.Context(), companyID, pr, mode)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, &ImportPreview{Source: src, Include: included(pr), CollisionStrategy: mode, Manifest: pr.manifest,
		Plan: pl, Warnings: []string{}})
}

func (x *Portability) handleImportApply(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	_, pr, src, mode, ok := x.readImport(rw, r)
	if !ok {
		return
	}
	// The preview comes first, on the same parsed and verified package.
	pl, _, err := x.plan(ctx, companyID, pr, mode)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	a, err := x.apply(ctx, companyID, pr, pl)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(r, companyID, "company.imported", map[string]any{"source": src, "collisionStrategy": mode, "progress": a.progress})
	sdk.WriteJSON(rw, http.StatusOK, &ImportResult{CompanyID: companyID, Source: src, Include: included(pr), CollisionStrategy: mode,
		Plan: pl, Progress: a.progress, Warnings: nonNil(a.warnings)})
}

// activity records an export or import; a failure is logged, not answered.
func (x *Portability) activity(r *http.Request, companyID, action string, details map[string]any) {
	if err := x.host.LogActivity(r.Context(), &sdk.ActivityEntry{CompanyID: companyID, Actor: sdk.ActorFrom(r.Context()), Action: action,
		EntityType: "company", EntityID: companyID, Details: details}); err != nil {
		x.log.Warn("error logging activity", "action", action, "error", err)
	}
}

// included lists the groups an import applies, in order.
func included(pr *parsed) []string {
	out := []string{}
	for _, g := range allGroups {
		if pr.include[g] {
			out = append(out, g)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func isAsset(name string) bool {
	return len(name) > len(AssetsDir) && name[:len(AssetsDir)] == AssetsDir
}

// writeDir writes a package into a directory (created when missing).
func writeDir(dir string, p *pkg) error {
	for _, name := range p.paths() {
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("error writing the package to %s: %w", dir, err)
		}
		if err := os.WriteFile(full, p.files[name], 0o644); err != nil {
			return fmt.Errorf("error writing the package to %s: %w", dir, err)
		}
	}
	return nil
}

// zipPkg archives a package under a root folder.
func zipPkg(root string, p *pkg) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range p.paths() {
		w, err := zw.Create(root + "/" + name)
		if err != nil {
			return nil, fmt.Errorf("error zipping %s: %w", name, err)
		}
		if _, err := w.Write(p.files[name]); err != nil {
			return nil, fmt.Errorf("error zipping %s: %w", name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("error zipping the package: %w", err)
	}
	return buf.Bytes(), nil
}
