package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// LocalFolderProblem is one reason a local folder is not healthy.
type LocalFolderProblem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Path    string `json:"path,omitempty"`
}

// Local folder problem codes.
const (
	FolderNotConfigured    = "not_configured"
	FolderNotAbsolute      = "not_absolute"
	FolderMissing          = "missing"
	FolderNotDirectory     = "not_directory"
	FolderNotReadable      = "not_readable"
	FolderNotWritable      = "not_writable"
	FolderMissingDirectory = "missing_directory"
	FolderMissingFile      = "missing_file"
	FolderPathTraversal    = "path_traversal"
	FolderSymlinkEscape    = "symlink_escape"
)

// LocalFolderStatus is a local folder as keel sees it on this node.
type LocalFolderStatus struct {
	FolderKey           string               `json:"folderKey"`
	DisplayName         string               `json:"displayName,omitempty"`
	Configured          bool                 `json:"configured"`
	Path                *string              `json:"path"`
	RealPath            *string              `json:"realPath"`
	Access              string               `json:"access"`
	Readable            bool                 `json:"readable"`
	Writable            bool                 `json:"writable"`
	RequiredDirectories []string             `json:"requiredDirectories"`
	RequiredFiles       []string             `json:"requiredFiles"`
	MissingDirectories  []string             `json:"missingDirectories"`
	MissingFiles        []string             `json:"missingFiles"`
	Healthy             bool                 `json:"healthy"`
	Problems            []LocalFolderProblem `json:"problems"`
	UpdatedAt           *time.Time           `json:"updatedAt,omitempty"`
	CheckedAt           time.Time            `json:"checkedAt"`
}

// LocalFolderList is a plugin's declared folders and their state in one company.
type LocalFolderList struct {
	PluginID     string               `json:"pluginId"`
	CompanyID    string               `json:"companyId"`
	Declarations []sdk.LocalFolder    `json:"declarations"`
	Folders      []*LocalFolderStatus `json:"folders"`
}

// inspectFolder checks a path against a declaration: absolute, no ".." segment, an existing
// readable directory (writable for readWrite), the required entries present and none of
// them a symlink leading out of the folder. It never creates anything but a probe file.
func inspectFolder(decl *sdk.LocalFolder, path string) *LocalFolderStatus {
	st := &LocalFolderStatus{FolderKey: decl.FolderKey, DisplayName: decl.DisplayName, Access: decl.FolderAccess(),
		RequiredDirectories: nonNil(decl.RequiredDirectories), RequiredFiles: nonNil(decl.RequiredFiles),
		MissingDirectories: []string{}, MissingFiles: []string{}, Problems: []LocalFolderProblem{}, CheckedAt: time.Now().UTC()}
	problem := func(code, msg, p string) {
		st.Problems = append(st.Problems, LocalFolderProblem{Code: code, Message: msg, Path: p})
	}
	if path == "" {
		problem(FolderNotConfigured, "No path is set for this folder", "")
		return st
	}
	st.Configured = true
	st.Path = &path
	if !filepath.IsAbs(path) {
		problem(FolderNotAbsolute, "The path must be absolute", path)
		return st
	}
	for _, seg := range strings.Split(filepath.ToSlash(path), "/") {
		if seg == ".." {
			problem(FolderPathTraversal, "The path must not contain .. segments", path)
			return st
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		problem(FolderMissing, "The path does not exist", path)
		return st
	}
	st.RealPath = &real
	info, err := os.Stat(real)
	if err != nil {
		problem(FolderMissing, "The path does not exist", path)
		return st
	}
	if !info.IsDir() {
		problem(FolderNotDirectory, "The path is not a directory", path)
		return st
	}
	if f, err := os.Open(real); err == nil {
		_, rerr := f.Readdirnames(1)
		st.Readable = rerr == nil || errors.Is(rerr, io.EOF)
		f.Close()
	}
	if !st.Readable {
		problem(FolderNotReadable, "The directory is not readable by keel", path)
	}
	if st.Access == sdk.FolderReadWrite {
		probe := filepath.Join(real, fmt.Sprintf(".keel-local-folder-probe-%d-%d", os.Getpid(), time.Now().UnixNano()))
		if f, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			_ = os.Remove(probe)
			st.Writable = true
		} else {
			problem(FolderNotWritable, "The directory is not writable by keel", path)
		}
	}
	check := func(rel string, dir bool) {
		full := filepath.Join(real, filepath.FromSlash(rel))
		target, err := filepath.EvalSymlinks(full)
		if err == nil && !within(real, target) {
			problem(FolderSymlinkEscape, "A symlink leads out of the folder", rel)
			return
		}
		var fi os.FileInfo
		if err == nil {
			fi, err = os.Stat(target)
		}
		switch {
		case dir && (err != nil || !fi.IsDir()):
			st.MissingDirectories = append(st.MissingDirectories, rel)
			problem(FolderMissingDirectory, "A required directory is missing", rel)
		case !dir && (err != nil || !fi.Mode().IsRegular()):
			st.MissingFiles = append(st.MissingFiles, rel)
			problem(FolderMissingFile, "A required file is missing", rel)
		}
	}
	for _, d := range decl.RequiredDirectories {
		check(d, true)
	}
	for _, f := range decl.RequiredFiles {
		check(f, false)
	}
	st.Healthy = len(st.Problems) == 0 && st.Readable && (st.Access == sdk.FolderRead || st.Writable)
	return st
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type storedFolder struct {
	path      string
	updatedAt time.Time
}

// localFolderRows reads a plugin's configured folders in a company, by folder key.
func (k *Kernel) localFolderRows(ctx context.Context, pluginKey, companyID string) (map[string]storedFolder, error) {
	out := map[string]storedFolder{}
	if companyID == "" {
		return out, nil
	}
	rows, err := k.Pool.Query(ctx, `SELECT folder_key, path, updated_at FROM kernel.plugin_local_folders WHERE extension_key = $1 AND company_id = $2`, pluginKey, companyID)
	if err != nil {
		return nil, fmt.Errorf("error reading local folders of %s: %w", pluginKey, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var f storedFolder
		if err := rows.Scan(&key, &f.path, &f.updatedAt); err != nil {
			return nil, fmt.Errorf("error reading local folders of %s: %w", pluginKey, err)
		}
		out[key] = f
	}
	return out, rows.Err()
}

// localFolderPaths is what a plugin call carries: the company's folders that are declared,
// each with its current health.
func (k *Kernel) localFolderPaths(ctx context.Context, p *installedPlugin, companyID string) (map[string]sdk.LocalFolderPath, error) {
	if len(p.mf.LocalFolders) == 0 || companyID == "" {
		return nil, nil
	}
	rows, err := k.localFolderRows(ctx, p.rec.PluginKey, companyID)
	if err != nil {
		return nil, Internal(err)
	}
	out := map[string]sdk.LocalFolderPath{}
	for _, decl := range p.mf.LocalFolders {
		f, ok := rows[decl.FolderKey]
		if !ok {
			continue
		}
		st := inspectFolder(&decl, f.path)
		path := f.path
		if st.RealPath != nil {
			path = *st.RealPath
		}
		out[decl.FolderKey] = sdk.LocalFolderPath{CompanyID: companyID, FolderKey: decl.FolderKey,
			Path: callerPath(p, companyID, decl.FolderKey, path), Access: st.Access, Healthy: st.Healthy}
	}
	return out, nil
}

// LocalFolderMount is one company's folder a wasm extension sees (wasm modules have no
// other filesystem): its real path on this node and where the module finds it.
type LocalFolderMount struct {
	CompanyID string
	FolderKey string
	// RealPath is the checked directory on the host (symlinks resolved).
	RealPath string
	// GuestPath is sdk.WasmFolderPath(CompanyID, FolderKey).
	GuestPath string
	ReadOnly  bool
}

// LocalFolderMounts lists the folders of every company a wasm extension declares and a
// company set: those that exist as directories keel can read on this node (a folder with
// missing required entries is still mounted, as a process extension still gets its path).
func (k *Kernel) LocalFolderMounts(ctx context.Context, key string, mf *sdk.Manifest) ([]LocalFolderMount, error) {
	if len(mf.LocalFolders) == 0 {
		return nil, nil
	}
	rows, err := k.Pool.Query(ctx, `SELECT company_id::text, folder_key, path FROM kernel.plugin_local_folders
		WHERE extension_key = $1 ORDER BY company_id, folder_key`, key)
	if err != nil {
		return nil, fmt.Errorf("error reading local folders of %s: %w", key, err)
	}
	type row struct{ company, folder, path string }
	var list []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.company, &r.folder, &r.path); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading local folders of %s: %w", key, err)
		}
		list = append(list, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading local folders of %s: %w", key, err)
	}
	var out []LocalFolderMount
	for _, r := range list {
		decl := mf.LocalFolder(r.folder)
		if decl == nil {
			continue
		}
		st := inspectFolder(decl, r.path)
		if st.RealPath == nil || !st.Readable {
			continue
		}
		out = append(out, LocalFolderMount{CompanyID: r.company, FolderKey: r.folder, RealPath: *st.RealPath,
			GuestPath: sdk.WasmFolderPath(r.company, r.folder), ReadOnly: decl.FolderAccess() == sdk.FolderRead})
	}
	return out, nil
}

// callerPath is the path of a folder as the plugin sees it: the host path for a process
// extension, the mount point for a wasm module.
func callerPath(p *installedPlugin, companyID, folderKey, hostPath string) string {
	if p.rec.Runtime == sdk.RuntimeWasm {
		return sdk.WasmFolderPath(companyID, folderKey)
	}
	return hostPath
}

type folderCompanyRequest struct {
	PluginID  string `path:"pluginId"`
	CompanyID string `path:"companyId"`
}

type folderRequest struct {
	PluginID  string `path:"pluginId"`
	CompanyID string `path:"companyId"`
	FolderKey string `path:"folderKey"`
}

type folderPathRequest struct {
	PluginID  string  `path:"pluginId" json:"-"`
	CompanyID string  `path:"companyId" json:"-"`
	FolderKey string  `path:"folderKey" json:"-"`
	Path      *string `json:"path"`
}

// folderScope checks the company and the plugin and returns the plugin.
func (k *Kernel) folderScope(ctx context.Context, pluginID, companyID string) (*installedPlugin, error) {
	if !isUUID(companyID) {
		return nil, NotFound("Company not found")
	}
	if err := k.AuthorizeCompany(ctx, ActorFrom(ctx), companyID, ""); err != nil {
		return nil, err
	}
	return k.pluginByID(ctx, pluginID)
}

func folderDecl(p *installedPlugin, key string) (*sdk.LocalFolder, error) {
	d := p.mf.LocalFolder(key)
	if d == nil {
		return nil, NotFound(fmt.Sprintf("Local folder %q is not declared by this plugin manifest", key))
	}
	return d, nil
}

type folderListEndpoint struct{ k *Kernel }

func (e *folderListEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/companies/{companyId}/local-folders", Access: AccessBoard,
		Summary: "A plugin's declared local folders and their state in a company"}
}

func (e *folderListEndpoint) Execute(ctx context.Context, req *folderCompanyRequest) (*LocalFolderList, error) {
	p, err := e.k.folderScope(ctx, req.PluginID, req.CompanyID)
	if err != nil {
		return nil, err
	}
	rows, err := e.k.localFolderRows(ctx, p.rec.PluginKey, req.CompanyID)
	if err != nil {
		return nil, Internal(err)
	}
	out := &LocalFolderList{PluginID: p.rec.ID, CompanyID: req.CompanyID, Declarations: p.mf.LocalFolders, Folders: []*LocalFolderStatus{}}
	if out.Declarations == nil {
		out.Declarations = []sdk.LocalFolder{}
	}
	for _, d := range p.mf.LocalFolders {
		f := rows[d.FolderKey]
		st := inspectFolder(&d, f.path)
		if f.path != "" {
			st.UpdatedAt = &f.updatedAt
		}
		out.Folders = append(out.Folders, st)
	}
	return out, nil
}

type folderStatusEndpoint struct{ k *Kernel }

func (e *folderStatusEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/companies/{companyId}/local-folders/{folderKey}/status", Access: AccessBoard,
		Summary: "One local folder's state in a company (checked now)"}
}

func (e *folderStatusEndpoint) Execute(ctx context.Context, req *folderRequest) (*LocalFolderStatus, error) {
	p, err := e.k.folderScope(ctx, req.PluginID, req.CompanyID)
	if err != nil {
		return nil, err
	}
	d, err := folderDecl(p, req.FolderKey)
	if err != nil {
		return nil, err
	}
	rows, err := e.k.localFolderRows(ctx, p.rec.PluginKey, req.CompanyID)
	if err != nil {
		return nil, Internal(err)
	}
	f := rows[d.FolderKey]
	st := inspectFolder(d, f.path)
	if f.path != "" {
		st.UpdatedAt = &f.updatedAt
	}
	return st, nil
}

// pathInput checks the body's path: present, absolute, no NUL and no ".." segment.
func pathInput(p *string) (string, error) {
	if p == nil || strings.TrimSpace(*p) == "" {
		return "", ValidationError(ValidationDetail{Path: "path", Message: "is required"})
	}
	path := *p
	if strings.ContainsRune(path, 0) {
		return "", ValidationError(ValidationDetail{Path: "path", Message: "must not contain a null byte"})
	}
	if !filepath.IsAbs(path) {
		return "", ValidationError(ValidationDetail{Path: "path", Message: "must be an absolute path"})
	}
	for _, seg := range strings.Split(filepath.ToSlash(path), "/") {
		if seg == ".." {
			return "", ValidationError(ValidationDetail{Path: "path", Message: "must not contain .. segments"})
		}
	}
	return path, nil
}

type folderValidateEndpoint struct{ k *Kernel }

func (e *folderValidateEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/companies/{companyId}/local-folders/{folderKey}/validate", Access: AccessInstanceAdmin,
		Summary: "Check a path for a local folder without storing it (body path)"}
}

func (e *folderValidateEndpoint) Execute(ctx context.Context, req *folderPathRequest) (*LocalFolderStatus, error) {
	p, err := e.k.folderScope(ctx, req.PluginID, req.CompanyID)
	if err != nil {
		return nil, err
	}
	d, err := folderDecl(p, req.FolderKey)
	if err != nil {
		return nil, err
	}
	path, err := pathInput(req.Path)
	if err != nil {
		return nil, err
	}
	return inspectFolder(d, path), nil
}

type folderPutEndpoint struct{ k *Kernel }

func (e *folderPutEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "PUT /api/plugins/{pluginId}/companies/{companyId}/local-folders/{folderKey}", Access: AccessInstanceAdmin,
		Summary: "Set a company's path for a local folder (body path); stored with its problems, and sent to the running plugin"}
}

func (e *folderPutEndpoint) Execute(ctx context.Context, req *folderPathRequest) (*LocalFolderStatus, error) {
	p, err := e.k.folderScope(ctx, req.PluginID, req.CompanyID)
	if err != nil {
		return nil, err
	}
	d, err := folderDecl(p, req.FolderKey)
	if err != nil {
		return nil, err
	}
	path, err := pathInput(req.Path)
	if err != nil {
		return nil, err
	}
	st := inspectFolder(d, path)
	var lastErr *string
	if len(st.Problems) > 0 {
		msgs := make([]string, len(st.Problems))
		for i, pr := range st.Problems {
			msgs[i] = pr.Message
		}
		s := strings.Join(msgs, "; ")
		lastErr = &s
	}
	real := ""
	if st.RealPath != nil {
		real = *st.RealPath
	}
	actor := ActorFrom(ctx)
	var updated time.Time
	if err := e.k.Pool.QueryRow(ctx, `INSERT INTO kernel.plugin_local_folders (extension_key, company_id, folder_key, path, real_path, healthy, last_error, updated_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (extension_key, company_id, folder_key) DO UPDATE SET path = EXCLUDED.path, real_path = EXCLUDED.real_path,
			healthy = EXCLUDED.healthy, last_error = EXCLUDED.last_error, updated_by = EXCLUDED.updated_by, updated_at = now()
		RETURNING updated_at`, p.rec.PluginKey, req.CompanyID, d.FolderKey, path, real, st.Healthy, lastErr, actor.UserID).Scan(&updated); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, NotFound("Plugin not found")
		}
		return nil, Internal(fmt.Errorf("error storing local folder %s of %s: %w", d.FolderKey, p.rec.PluginKey, err))
	}
	st.UpdatedAt = &updated
	if _, err := e.k.ActivityInsert(ctx, &ActivityInsertParams{CompanyID: req.CompanyID, ActorType: "user", ActorID: actor.UserID,
		Action: "plugin.local_folder.configured", EntityType: "plugin", EntityID: p.rec.ID,
		Details: map[string]any{"pluginKey": p.rec.PluginKey, "folderKey": d.FolderKey, "path": path, "healthy": st.Healthy}}); err != nil {
		return nil, Internal(err)
	}
	if p.ready() && e.k.pluginRuntime != nil {
		// Tell the running plugin now; every later call carries the folder anyway.
		target := path
		if st.RealPath != nil {
			target = *st.RealPath
		}
		in := &sdk.LocalFolderPath{CompanyID: req.CompanyID, FolderKey: d.FolderKey, Path: callerPath(p, req.CompanyID, d.FolderKey, target),
			Access: st.Access, Healthy: st.Healthy}
		if _, err := e.k.pluginRuntime.PluginCall(ctx, p.rec.PluginKey, sdk.LocalFolderMethod, actor, req.CompanyID, in); err != nil {
			e.k.log.Warn("plugin not told of its local folder", "plugin", p.rec.PluginKey, "folder", d.FolderKey, "error", err)
		}
	}
	return st, nil
}
