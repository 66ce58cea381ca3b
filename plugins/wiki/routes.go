package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
)

// apiPrefix is where the wiki's routes live, as the reference product serves a plugin's
// routes: /api/plugins/<plugin>/api/<route>.
const apiPrefix = "/api/plugins/" + pluginKey + "/api"

// HTTPHandler serves the manifest routes.
func (w *Wiki) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	w.mountUI(mux) // the board's HTML fragments (ui.go)
	handle := func(pattern string, fn func(r *http.Request) (int, any, error)) {
		method, p, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+apiPrefix+p, func(rw http.ResponseWriter, r *http.Request) {
			status, out, err := fn(r)
			if err != nil {
				var e *sdk.Error
				if !errors.As(err, &e) {
					sdk.LoggerFrom(r.Context()).Error("wiki request failed", "error", err)
				}
				sdk.WriteErr(rw, err)
				return
			}
			sdk.WriteJSON(rw, status, out)
		})
	}
	handle("GET /overview", w.overview)
	handle("POST /bootstrap", w.bootstrapRoute)
	handle("POST /sources", w.captureSourceRoute)
	handle("GET /spaces", w.listSpaces)
	handle("POST /spaces", w.createSpace)
	handle("PATCH /spaces/{spaceSlug}", w.updateSpace)
	handle("POST /spaces/{spaceSlug}/bootstrap", w.bootstrapSpace)
	handle("POST /spaces/{spaceSlug}/archive", w.archiveSpace)
	handle("GET /operations", w.listOperations)
	handle("POST /query-sessions", w.startQuery)
	handle("POST /file-as-page", w.fileAsPage)
	handle("POST /index-refresh", w.indexRefreshRoute)
	return mux
}

// scopeBody is what every write route's body carries.
type scopeBody struct {
	CompanyID string `json:"companyId"`
	WikiID    string `json:"wikiId"`
	SpaceSlug string `json:"spaceSlug"`
}

// decode reads a JSON body into v (unknown fields are ignored, as the reference does).
func decode(r *http.Request, v any) error {
	if err := sdk.DecodeJSON(r, v); err != nil {
		return err
	}
	return nil
}

// wikiIDOf returns the wiki id, "default" when empty; ids are slugs.
func wikiIDOf(s string) (string, error) {
	if s == "" {
		return defaultWikiID, nil
	}
	if slugify(s) != s {
		return "", sdk.Invalid("wikiId", "must be a slug (lowercase letters, digits and dashes)")
	}
	return s, nil
}

// spaceSlugOf returns the space slug, "default" when empty.
func spaceSlugOf(s string) string {
	if s == "" {
		return defaultSpace
	}
	return slugify(s)
}

// routeSpace resolves the company (resolved and checked by keel), wiki and space of a request.
func (w *Wiki) routeSpace(r *http.Request, wikiID, slug string, allowArchived bool) (*Space, error) {
	wid, err := wikiIDOf(wikiID)
	if err != nil {
		return nil, err
	}
	return w.space(r.Context(), sdk.CompanyIDFrom(r.Context()), wid, spaceSlugOf(slug), allowArchived)
}

// FolderStatus is the wiki root's state as the overview shows it.
type FolderStatus struct {
	FolderKey    string   `json:"folderKey"`
	Configured   bool     `json:"configured"`
	Path         *string  `json:"path"`
	Exists       bool     `json:"exists"`
	MissingFiles []string `json:"missingFiles"`
	Healthy      bool     `json:"healthy"`
}

func (w *Wiki) folderStatus(ctx context.Context, sp *Space) *FolderStatus {
	st := &FolderStatus{FolderKey: folderKey, MissingFiles: []string{}}
	root, err := w.rootPath(ctx, sp.CompanyID, sp.WikiID, nil)
	if err != nil {
		return st
	}
	st.Configured, st.Path = true, &root
	f := spaceFolder(root, sp)
	if r, err := f.open(false); err == nil {
		r.Close()
		st.Exists = true
	}
	for _, p := range []string{"AGENTS.md", "IDEA.md", "wiki/index.md", "wiki/log.md"} {
		if _, ok, err := f.read(p); err != nil || !ok {
			st.MissingFiles = append(st.MissingFiles, p)
		}
	}
	st.Healthy = st.Exists && len(st.MissingFiles) == 0
	return st
}

// managedView splits the plugin's managed resources by kind.
func (w *Wiki) managedView(ctx context.Context, companyID string, reconcile bool) (map[string]any, error) {
	var l *sdk.ManagedResourceList
	var err error
	if reconcile {
		l, err = w.host.ReconcileManaged(ctx, companyID)
	} else {
		l, err = w.host.ManagedResources(ctx, companyID)
	}
	if err != nil {
		return nil, fmt.Errorf("error reading the wiki's managed resources: %w", err)
	}
	out := map[string]any{"managedAgent": l.Find(sdk.ManagedAgentKind, maintainerKey), "managedProject": l.Find(sdk.ManagedProjectKind, projectKey)}
	skills, routines := []*sdk.ManagedResource{}, []*sdk.ManagedResource{}
	for _, r := range l.Resources {
		switch r.Kind {
		case sdk.ManagedSkillKind:
			skills = append(skills, r)
		case sdk.ManagedRoutineKind:
			routines = append(routines, r)
		}
	}
	out["managedSkills"], out["managedRoutines"] = skills, routines
	return out, nil
}

func (w *Wiki) overview(r *http.Request) (int, any, error) {
	ctx := r.Context()
	sp, err := w.routeSpace(r, r.URL.Query().Get("wikiId"), "", false)
	if err != nil {
		return 0, nil, err
	}
	managed, err := w.managedView(ctx, sp.CompanyID, false)
	if err != nil {
		return 0, nil, err
	}
	var ops int
	if err := w.db.QueryRowContext(ctx, `SELECT count(*) FROM wiki_operations WHERE company_id = $1 AND wiki_id = $2`,
		sp.CompanyID, sp.WikiID).Scan(&ops); err != nil {
		return 0, nil, fmt.Errorf("error counting operations: %w", err)
	}
	var pages, sources int
	if err := w.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM wiki_pages WHERE space_id = $1), (SELECT count(*) FROM wiki_sources WHERE space_id = $1)`,
		sp.ID).Scan(&pages, &sources); err != nil {
		return 0, nil, fmt.Errorf("error counting pages: %w", err)
	}
	cfg := w.cfg.Load()
	out := map[string]any{
		"status": "ok", "checkedAt": w.now(), "wikiId": sp.WikiID, "defaultSpace": sp, "folder": w.folderStatus(ctx, sp),
		"operationCount": ops, "pageCount": pages, "sourceCount": sources,
		"eventIngestion": map[string]any{"enabled": cfg.EventIngestion, "sources": map[string]bool{"issues": cfg.EventIngestion, "comments": cfg.EventIngestion, "documents": cfg.EventIngestion},
			"maxCharacters": cfg.MaxIssueSourceCharacters},
		"limits": map[string]int{"maxSourceBytes": cfg.MaxSourceBytes, "maxIssueSourceCharacters": cfg.MaxIssueSourceCharacters,
			"maxCursorWindowCharacters": cfg.MaxCursorWindowCharacters, "maxRoutineRunCharacters": cfg.MaxRoutineRunCharacters},
		"capabilities": map[string]bool{"fullTextSearch": true, "spaces": true, "querySessions": true, "eventIngestion": true, "renameKeepsBacklinks": true},
		"prompts": map[string]string{
			"query": "Answer from the LLM Wiki: search it with wiki_search, read the pages you cite with wiki_read_page, and answer with citations to wiki paths.",
			"lint":  "Lint the LLM Wiki: find orphan pages, broken links, pages without sources, duplicates, contradictions and index or log drift; fix the low-risk ones.",
		},
	}
	for k, v := range managed {
		out[k] = v
	}
	return http.StatusOK, out, nil
}

func (w *Wiki) bootstrapRoute(r *http.Request) (int, any, error) {
	ctx := r.Context()
	var body struct {
		scopeBody
		Path string `json:"path"`
	}
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	sp, err := w.routeSpace(r, body.WikiID, "", false)
	if err != nil {
		return 0, nil, err
	}
	if body.Path != "" {
		if !filepath.IsAbs(body.Path) || filepath.Clean(body.Path) != body.Path {
			return 0, nil, sdk.Invalid("path", "must be an absolute, clean path")
		}
		if _, err := w.db.ExecContext(ctx, `UPDATE wiki_instances SET configured_root_path = $3, updated_at = now()
			WHERE company_id = $1 AND wiki_id = $2`, sp.CompanyID, sp.WikiID, body.Path); err != nil {
			return 0, nil, fmt.Errorf("error keeping the wiki root: %w", err)
		}
		sp.ConfiguredRootPath = &body.Path
	}
	root, err := w.rootPath(ctx, sp.CompanyID, sp.WikiID, nil)
	if err != nil {
		return 0, nil, err
	}
	written, preserved, err := spaceFolder(root, sp).bootstrap(w.now().Format(time.DateOnly))
	if err != nil {
		return 0, nil, err
	}
	managed, err := w.managedView(ctx, sp.CompanyID, true)
	if err != nil {
		return 0, nil, err
	}
	if _, err := w.refreshIndex(ctx, sp, spaceFolder(root, sp)); err != nil {
		return 0, nil, err
	}
	if err := w.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: sp.CompanyID, Actor: sdk.ActorFrom(ctx), Action: "wiki.bootstrapped",
		EntityType: "wiki", EntityID: sp.WikiID, Details: map[string]any{"path": root, "writtenFiles": written}}); err != nil {
		return 0, nil, err
	}
	out := map[string]any{"status": "ok", "folder": w.folderStatus(ctx, sp), "wikiId": sp.WikiID, "space": sp,
		"writtenFiles": written, "preservedFiles": preserved}
	for k, v := range managed {
		out[k] = v
	}
	return http.StatusCreated, out, nil
}

// SourceCapture is a source to capture.
type SourceCapture struct {
	SourceType string          `json:"sourceType"`
	Title      string          `json:"title"`
	URL        string          `json:"url"`
	Contents   string          `json:"contents"`
	RawPath    string          `json:"rawPath"`
	Metadata   json.RawMessage `json:"metadata"`
	// sourceKey de-duplicates event captures.
	sourceKey string
}

// SourceResult is the answer of a capture.
type SourceResult struct {
	Status    string `json:"status"`
	SourceID  string `json:"sourceId"`
	WikiID    string `json:"wikiId"`
	SpaceSlug string `json:"spaceSlug"`
	RawPath   string `json:"rawPath"`
	Hash      string `json:"hash"`
	Title     string `json:"title"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// captureSource writes a source under raw/ and records it (capture only: no ingest).
func (w *Wiki) captureSource(ctx context.Context, sp *Space, f *folder, in *SourceCapture) (*SourceResult, error) {
	if in.Contents == "" {
		return nil, sdk.Invalid("contents", "is required")
	}
	if max := w.cfg.Load().MaxSourceBytes; len(in.Contents) > max {
		return nil, &sdk.Error{Status: http.StatusRequestEntityTooLarge, Code: "source_too_large",
			Message: fmt.Sprintf("Source is %d bytes, more than the wiki's maxSourceBytes (%d)", len(in.Contents), max)}
	}
	if in.Title == "" {
		in.Title = "Untitled source"
	}
	if in.SourceType == "" {
		in.SourceType = "text"
	}
	hash := hashOf([]byte(in.Contents))
	if in.RawPath == "" {
		slug := slugify(in.Title)
		if slug == "" {
			slug = "source"
		}
		in.RawPath = "raw/" + w.now().Format(time.DateOnly) + "-" + slug + "-" + hash[:8] + ".md"
	}
	if err := checkRawPath(in.RawPath); err != nil {
		return nil, err
	}
	if in.sourceKey != "" {
		var existing SourceResult
		err := w.db.QueryRowContext(ctx, `SELECT id, raw_path, content_hash, title FROM wiki_sources WHERE space_id = $1 AND source_key = $2`,
			sp.ID, in.sourceKey).Scan(&existing.SourceID, &existing.RawPath, &existing.Hash, &existing.Title)
		if err == nil {
			existing.Status, existing.WikiID, existing.SpaceSlug, existing.Duplicate = "ok", sp.WikiID, sp.Slug, true
			return &existing, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("error reading sources: %w", err)
		}
	}
	if err := f.writeAtomic(in.RawPath, []byte(in.Contents)); err != nil {
		return nil, err
	}
	meta := in.Metadata
	if len(meta) == 0 || string(meta) == "null" {
		meta = json.RawMessage(`{}`)
	}
	id := uuid.NewString()
	err := w.db.QueryRowContext(ctx, `INSERT INTO wiki_sources (id, company_id, wiki_id, space_id, source_type, source_key, title, url,
		raw_path, content_hash, body_text, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (space_id, raw_path) DO UPDATE SET title = EXCLUDED.title, url = EXCLUDED.url, content_hash = EXCLUDED.content_hash,
			body_text = EXCLUDED.body_text, metadata = EXCLUDED.metadata, source_type = EXCLUDED.source_type, updated_at = now()
		RETURNING id`, id, sp.CompanyID, sp.WikiID, sp.ID, in.SourceType, nullable(in.sourceKey), truncate(in.Title, 500), nullable(in.URL),
		in.RawPath, hash, truncate(strings.ToValidUTF8(in.Contents, ""), maxIndexedBody), string(meta)).Scan(&id)
	if err != nil {
		return nil, fmt.Errorf("error recording source %s: %w", in.RawPath, err)
	}
	return &SourceResult{Status: "ok", SourceID: id, WikiID: sp.WikiID, SpaceSlug: sp.Slug, RawPath: in.RawPath, Hash: hash, Title: in.Title}, nil
}

func (w *Wiki) captureSourceRoute(r *http.Request) (int, any, error) {
	var body struct {
		scopeBody
		SourceCapture
	}
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	sp, f, err := w.routeFolder(r, body.WikiID, body.SpaceSlug)
	if err != nil {
		return 0, nil, err
	}
	res, err := w.captureSource(r.Context(), sp, f, &body.SourceCapture)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, res, nil
}

// routeFolder resolves a request's space and its folder.
func (w *Wiki) routeFolder(r *http.Request, wikiID, slug string) (*Space, *folder, error) {
	sp, err := w.routeSpace(r, wikiID, slug, false)
	if err != nil {
		return nil, nil, err
	}
	root, err := w.rootPath(r.Context(), sp.CompanyID, sp.WikiID, nil)
	if err != nil {
		return nil, nil, err
	}
	return sp, spaceFolder(root, sp), nil
}

func (w *Wiki) listSpaces(r *http.Request) (int, any, error) {
	ctx := r.Context()
	sp, err := w.routeSpace(r, r.URL.Query().Get("wikiId"), "", false)
	if err != nil {
		return 0, nil, err
	}
	rows, err := w.db.QueryContext(ctx, `SELECT `+spaceColumns+` FROM wiki_spaces s WHERE company_id = $1 AND wiki_id = $2
		AND status <> 'archived' ORDER BY slug <> 'default', display_name, slug`, sp.CompanyID, sp.WikiID)
	if err != nil {
		return 0, nil, fmt.Errorf("error listing spaces: %w", err)
	}
	defer rows.Close()
	out := []*Space{}
	for rows.Next() {
		s, err := scanSpace(rows)
		if err != nil {
			return 0, nil, fmt.Errorf("error listing spaces: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("error listing spaces: %w", err)
	}
	return http.StatusOK, map[string]any{"spaces": out}, nil
}

func (w *Wiki) createSpace(r *http.Request) (int, any, error) {
	ctx := r.Context()
	var body struct {
		scopeBody
		Slug        string          `json:"slug"`
		DisplayName string          `json:"displayName"`
		FolderMode  string          `json:"folderMode"`
		AccessScope string          `json:"accessScope"`
		Settings    json.RawMessage `json:"settings"`
	}
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	if body.FolderMode != "" && body.FolderMode != "managed_subfolder" {
		return 0, nil, sdk.Unprocessable("Only managed_subfolder spaces are supported until dynamic local folder bindings are available.")
	}
	switch body.AccessScope {
	case "":
		body.AccessScope = "shared"
	case "shared", "personal", "team":
	default:
		return 0, nil, sdk.Invalid("accessScope", "must be shared, personal or team")
	}
	if strings.TrimSpace(body.DisplayName) == "" {
		body.DisplayName = "New space"
	}
	slug := slugify(body.Slug)
	if body.Slug == "" {
		slug = slugify(body.DisplayName)
	}
	if slug == "" {
		return 0, nil, sdk.Invalid("slug", "must contain letters or digits")
	}
	def, err := w.routeSpace(r, body.WikiID, "", false)
	if err != nil {
		return 0, nil, err
	}
	if slug == defaultSpace {
		return http.StatusCreated, map[string]any{"status": "created", "space": def}, nil
	}
	settings := body.Settings
	if len(settings) == 0 || string(settings) == "null" {
		settings = json.RawMessage(`{}`)
	}
	if err := checkIngestionSettings(settings); err != nil {
		return 0, nil, err
	}
	owner := sdk.ActorFrom(ctx)
	var ownerUser, ownerAgent any
	if body.AccessScope == "personal" && owner != nil {
		if owner.Type == "agent" {
			ownerAgent = owner.AgentId
		} else {
			ownerUser = nullable(owner.UserId)
		}
	}
	res, err := w.db.ExecContext(ctx, `INSERT INTO wiki_spaces (id, company_id, wiki_id, slug, display_name, path_prefix, access_scope,
		owner_user_id, owner_agent_id, settings) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		uuid.NewString(), def.CompanyID, def.WikiID, slug, truncate(strings.TrimSpace(body.DisplayName), 200), "spaces/"+slug,
		body.AccessScope, ownerUser, ownerAgent, string(settings))
	if err != nil {
		return 0, nil, fmt.Errorf("error creating space %s: %w", slug, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, nil, sdk.Conflict(fmt.Sprintf("An LLM Wiki space with slug %s already exists", slug))
	}
	sp, err := w.space(ctx, def.CompanyID, def.WikiID, slug, false)
	if err != nil {
		return 0, nil, err
	}
	if root, err := w.rootPath(ctx, sp.CompanyID, sp.WikiID, nil); err == nil {
		if _, _, err := spaceFolder(root, sp).bootstrap(w.now().Format(time.DateOnly)); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusCreated, map[string]any{"status": "created", "space": sp}, nil
}

func (w *Wiki) updateSpace(r *http.Request) (int, any, error) {
	ctx := r.Context()
	var body struct {
		scopeBody
		DisplayName *string         `json:"displayName"`
		Status      *string         `json:"status"`
		Settings    json.RawMessage `json:"settings"`
	}
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	sp, err := w.routeSpace(r, body.WikiID, r.PathValue("spaceSlug"), true)
	if err != nil {
		return 0, nil, err
	}
	if body.Status != nil {
		switch *body.Status {
		case "active":
		case "archived":
			if sp.Slug == defaultSpace {
				return 0, nil, sdk.Unprocessable("The default LLM Wiki space cannot be archived")
			}
		default:
			return 0, nil, sdk.Invalid("status", "must be active or archived")
		}
	}
	if body.DisplayName != nil && strings.TrimSpace(*body.DisplayName) == "" {
		return 0, nil, sdk.Invalid("displayName", "must not be empty")
	}
	settings := any(nil)
	if len(body.Settings) > 0 && string(body.Settings) != "null" {
		var m map[string]any
		if err := json.Unmarshal(body.Settings, &m); err != nil {
			return 0, nil, sdk.Invalid("settings", "must be an object")
		}
		if err := checkIngestionSettings(body.Settings); err != nil {
			return 0, nil, err
		}
		settings = string(body.Settings)
	}
	if _, err := w.db.ExecContext(ctx, `UPDATE wiki_spaces SET display_name = coalesce($2, display_name), status = coalesce($3, status),
		settings = CASE WHEN $4::jsonb IS NULL THEN settings ELSE settings || $4::jsonb END, updated_at = now() WHERE id = $1`,
		sp.ID, body.DisplayName, body.Status, settings); err != nil {
		return 0, nil, fmt.Errorf("error updating space %s: %w", sp.Slug, err)
	}
	sp, err = w.space(ctx, sp.CompanyID, sp.WikiID, sp.Slug, true)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"status": "ok", "space": sp}, nil
}

func (w *Wiki) bootstrapSpace(r *http.Request) (int, any, error) {
	var body scopeBody
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	sp, f, err := w.routeFolder(r, body.WikiID, r.PathValue("spaceSlug"))
	if err != nil {
		return 0, nil, err
	}
	written, preserved, err := f.bootstrap(w.now().Format(time.DateOnly))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"status": "ok", "wikiId": sp.WikiID, "space": sp, "writtenFiles": written, "preservedFiles": preserved}, nil
}

func (w *Wiki) archiveSpace(r *http.Request) (int, any, error) {
	var body scopeBody
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	sp, err := w.routeSpace(r, body.WikiID, r.PathValue("spaceSlug"), true)
	if err != nil {
		return 0, nil, err
	}
	if sp.Slug == defaultSpace {
		return 0, nil, sdk.Unprocessable("The default LLM Wiki space cannot be archived")
	}
	if _, err := w.db.ExecContext(r.Context(), `UPDATE wiki_spaces SET status = 'archived', updated_at = now() WHERE id = $1`, sp.ID); err != nil {
		return 0, nil, fmt.Errorf("error archiving space %s: %w", sp.Slug, err)
	}
	sp.Status = "archived"
	return http.StatusOK, map[string]any{"status": "archived", "space": sp}, nil
}

func (w *Wiki) indexRefreshRoute(r *http.Request) (int, any, error) {
	var body scopeBody
	if err := decode(r, &body); err != nil {
		return 0, nil, err
	}
	sp, f, err := w.routeFolder(r, body.WikiID, body.SpaceSlug)
	if err != nil {
		return 0, nil, err
	}
	res, err := w.refreshIndex(r.Context(), sp, f)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// queryLimit parses an optional limit query parameter.
func queryLimit(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, sdk.Invalid("limit", fmt.Sprintf("must be an integer from 1 to %d", max))
	}
	return n, nil
}
