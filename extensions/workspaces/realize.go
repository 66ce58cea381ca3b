package workspaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Provided methods: the agents owner's run engine resolves each issue run's working
// directory through realize.
func init() {
	addMethods(map[string]method{
		"realize": {
			Description: "Resolve the working directory of an issue run (REFERENCE.md 3 step 4). Input {runId, agentId, issueId}. " +
				"Output {executionWorkspaceId?, cwd?, source: project_primary|agent_home, strategy?: project_primary|git_worktree, " +
				"env: the run's SERVICE_WORKSPACE_* and SERVICE_RUNTIME_* variables, warning?: a note for the run log}. An issue without a project workspace gets " +
				"source agent_home and no cwd (the adapter uses the agent's own directory). 422 when the workspace cannot be made.",
			Call: (*Workspaces).methodRealize,
		},
	})
}

// Workspace sources (SERVICE_WORKSPACE_SOURCE).
const (
	SourceProjectPrimary = "project_primary"
	SourceAgentHome      = "agent_home"
)

// issueRecord is the part of an issue realize reads from the work owner.
type issueRecord struct {
	ID                 string  `json:"id"`
	Identifier         string  `json:"identifier"`
	Title              string  `json:"title"`
	Status             string  `json:"status"`
	ProjectID          *string `json:"projectId"`
	ProjectWorkspaceID *string `json:"projectWorkspaceId"`
}

// projectWorkspace is a project workspace as the work owner shows it.
type projectWorkspace struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	SourceType     string          `json:"sourceType"`
	Cwd            *string         `json:"cwd"`
	RepoURL        *string         `json:"repoUrl"`
	RepoRef        *string         `json:"repoRef"`
	DefaultRef     *string         `json:"defaultRef"`
	SetupCommand   *string         `json:"setupCommand"`
	CleanupCommand *string         `json:"cleanupCommand"`
	IsPrimary      bool            `json:"isPrimary"`
	RuntimeConfig  json.RawMessage `json:"runtimeConfig"`
}

// projectRecord is the part of a project realize reads from the work owner.
type projectRecord struct {
	ID                       string              `json:"id"`
	Name                     string              `json:"name"`
	ExecutionWorkspacePolicy json.RawMessage     `json:"executionWorkspacePolicy"`
	Workspaces               []*projectWorkspace `json:"workspaces"`
}

// workspacePolicy is a project's executionWorkspacePolicy (the keys keel reads).
type workspacePolicy struct {
	Enabled *bool `json:"enabled"`
	// DefaultMode is shared_workspace (default) or isolated_workspace.
	DefaultMode       string `json:"defaultMode"`
	WorkspaceStrategy struct {
		// Type is project_primary or git_worktree (git_worktree isolates like isolated_workspace).
		Type              string `json:"type"`
		BaseRef           string `json:"baseRef"`
		BranchTemplate    string `json:"branchTemplate"`
		WorktreeParentDir string `json:"worktreeParentDir"`
		ProvisionCommand  string `json:"provisionCommand"`
		TeardownCommand   string `json:"teardownCommand"`
	} `json:"workspaceStrategy"`
	WorkspaceRuntime json.RawMessage `json:"workspaceRuntime"`
}

// isolated reports whether the policy gives each issue its own worktree.
func (p *workspacePolicy) isolated() bool {
	if p.Enabled != nil && !*p.Enabled {
		return false
	}
	return p.DefaultMode == ModeIsolated || p.WorkspaceStrategy.Type == StrategyGitWorktree
}

// defaultBranchTemplate names an issue's branch.
const defaultBranchTemplate = "{{issue.identifier}}-{{slug}}"

// defaultWorktreeParent is where worktrees go, relative to the repository's top.
const defaultWorktreeParent = ".keel/worktrees"

// realizeInput is the input of realize.
type realizeInput struct {
	RunID   string `json:"runId"`
	AgentID string `json:"agentId"`
	IssueID string `json:"issueId"`
}

// RealizeResult is the output of realize.
type RealizeResult struct {
	ExecutionWorkspaceID string            `json:"executionWorkspaceId,omitempty"`
	Cwd                  string            `json:"cwd,omitempty"`
	Source               string            `json:"source"`
	Strategy             string            `json:"strategy,omitempty"`
	Env                  map[string]string `json:"env"`
	// Warning is a note for the run's log (a fallback to the agent's own directory).
	Warning string `json:"warning,omitempty"`
}

func (x *Workspaces) methodRealize(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in realizeInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if !sdk.IsUUID(call.CompanyID) {
		return nil, sdk.Invalid("companyId", "the call must name a company")
	}
	if !sdk.IsUUID(in.IssueID) {
		return nil, sdk.Invalid("issueId", "must be a UUID")
	}
	if in.RunID != "" && !sdk.IsUUID(in.RunID) {
		return nil, sdk.Invalid("runId", "must be a UUID")
	}
	home := &RealizeResult{Source: SourceAgentHome, Env: map[string]string{"SERVICE_WORKSPACE_SOURCE": SourceAgentHome}}
	var iss issueRecord
	if err := x.host.Call(ctx, "work.issues.get", sdk.SystemActor(), call.CompanyID, map[string]any{"id": in.IssueID}, &iss); err != nil {
		var e *sdk.Error
		if sdk.IsMethodNotProvided(err) || (errors.As(err, &e) && e.Status == http.StatusNotFound) {
			// No work owner, or the issue is gone: the run goes on in the agent's directory.
			home.Warning = "the run's issue cannot be read; it works in the agent's own directory"
			return home, nil
		}
		return nil, fmt.Errorf("error reading issue %s: %w", in.IssueID, err)
	}
	if iss.ProjectID == nil {
		return home, nil
	}
	var proj projectRecord
	if err := x.host.Call(ctx, "work.projects.get", sdk.SystemActor(), call.CompanyID, map[string]any{"projectId": *iss.ProjectID}, &proj); err != nil {
		return nil, fmt.Errorf("error reading project %s: %w", *iss.ProjectID, err)
	}
	pw := pickWorkspace(&proj, iss.ProjectWorkspaceID)
	if pw == nil || pw.Cwd == nil || *pw.Cwd == "" {
		if pw != nil {
			setEnv(home.Env, "SERVICE_WORKSPACE_ID", pw.ID)
			setEnv(home.Env, "SERVICE_WORKSPACE_REPO_URL", deref(pw.RepoURL))
		}
		home.Env["SERVICE_WORKSPACES_JSON"] = workspacesJSON(&proj)
		return home, nil
	}
	var policy workspacePolicy
	if len(proj.ExecutionWorkspacePolicy) > 0 {
		_ = json.Unmarshal(proj.ExecutionWorkspacePolicy, &policy)
	}
	var w *ExecutionWorkspace
	var err error
	if policy.isolated() {
		w, err = x.realizeWorktree(ctx, call.CompanyID, &in, &iss, &proj, pw, &policy)
	} else {
		if st, serr := os.Stat(*pw.Cwd); serr != nil || !st.IsDir() {
			// The project's folder is not on this node: the run goes on in the agent's own
			// directory, with a note in its log.
			setEnv(home.Env, "SERVICE_WORKSPACE_ID", pw.ID)
			setEnv(home.Env, "SERVICE_WORKSPACE_REPO_URL", deref(pw.RepoURL))
			home.Env["SERVICE_WORKSPACES_JSON"] = workspacesJSON(&proj)
			home.Warning = fmt.Sprintf("project workspace cwd %s is not an existing directory; the run works in the agent's own directory", *pw.Cwd)
			return home, nil
		}
		w, err = x.realizeShared(ctx, call.CompanyID, &proj, pw, &policy)
	}
	if err != nil {
		return nil, err
	}
	return x.runEnv(ctx, w, &proj, pw)
}

// pickWorkspace is the issue's project workspace, else the project's primary, else its
// first with a cwd.
func pickWorkspace(p *projectRecord, want *string) *projectWorkspace {
	if want != nil {
		for _, w := range p.Workspaces {
			if w.ID == *want {
				return w
			}
		}
	}
	for _, w := range p.Workspaces {
		if w.IsPrimary {
			return w
		}
	}
	for _, w := range p.Workspaces {
		if w.Cwd != nil && *w.Cwd != "" {
			return w
		}
	}
	return nil
}

// workspaceConfig is an execution workspace's config: its runtime services and commands
// and the command run before its worktree is removed.
type workspaceConfig struct {
	WorkspaceRuntime json.RawMessage `json:"workspaceRuntime,omitempty"`
	CleanupCommand   string          `json:"cleanupCommand,omitempty"`
}

// initialConfig is a new execution workspace's config: the project policy's runtime, else
// the project workspace's runtimeConfig.
func initialConfig(pw *projectWorkspace, policy *workspacePolicy) []byte {
	c := workspaceConfig{WorkspaceRuntime: policy.WorkspaceRuntime, CleanupCommand: policy.WorkspaceStrategy.TeardownCommand}
	if len(c.WorkspaceRuntime) == 0 || string(c.WorkspaceRuntime) == "null" {
		c.WorkspaceRuntime = pw.RuntimeConfig
	}
	if len(c.WorkspaceRuntime) == 0 || string(c.WorkspaceRuntime) == "null" {
		c.WorkspaceRuntime = nil
	}
	if c.CleanupCommand == "" {
		c.CleanupCommand = deref(pw.CleanupCommand)
	}
	b, _ := json.Marshal(c)
	return b
}

// realizeShared returns the project workspace's open shared execution workspace, made on
// first use.
func (x *Workspaces) realizeShared(ctx context.Context, companyID string, proj *projectRecord, pw *projectWorkspace,
	policy *workspacePolicy) (*ExecutionWorkspace, error) {
	if st, err := os.Stat(*pw.Cwd); err != nil || !st.IsDir() {
		return nil, sdk.Unprocessable(fmt.Sprintf("Project workspace cwd %s is not an existing directory", *pw.Cwd))
	}
	_, err := x.pool.Exec(ctx, `INSERT INTO execution_workspaces (id, company_id, project_id, project_workspace_id, mode, strategy_type,
		provider_type, name, cwd, repo_url, base_ref, config) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT DO NOTHING`, uuid.Must(uuid.NewV7()).String(), companyID, proj.ID, pw.ID, ModeShared, StrategyProjectPrimary,
		ProviderLocalFS, nameOr(pw.Name, proj.Name), *pw.Cwd, pw.RepoURL, firstNonEmpty(deref(pw.RepoRef), deref(pw.DefaultRef)),
		initialConfig(pw, policy))
	if err != nil {
		return nil, fmt.Errorf("error recording the shared workspace of %s: %w", pw.ID, err)
	}
	w, err := scanWorkspace(x.pool.QueryRow(ctx, `UPDATE execution_workspaces SET last_used_at = now(), updated_at = now(),
		status = CASE WHEN status = 'idle' THEN 'active' ELSE status END
		WHERE project_workspace_id = $1 AND mode = $2 AND status <> 'archived' RETURNING `+workspaceColumns, pw.ID, ModeShared))
	if err != nil {
		return nil, fmt.Errorf("error reading the shared workspace of %s: %w", pw.ID, err)
	}
	return w, nil
}

// realizeWorktree returns the issue's open isolated workspace, a git worktree of the
// project workspace's repository on the issue's own branch, made (and provisioned) on
// first use and remade when its folder went away.
func (x *Workspaces) realizeWorktree(ctx context.Context, companyID string, in *realizeInput, iss *issueRecord, proj *projectRecord,
	pw *projectWorkspace, policy *workspacePolicy) (*ExecutionWorkspace, error) {
	w, err := scanWorkspace(x.pool.QueryRow(ctx, `UPDATE execution_workspaces SET last_used_at = now(), updated_at = now(),
		status = CASE WHEN status = 'idle' THEN 'active' ELSE status END
		WHERE source_issue_id = $1 AND mode = $2 AND status <> 'archived' RETURNING `+workspaceColumns, iss.ID, ModeIsolated))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		w = nil
	case err != nil:
		return nil, fmt.Errorf("error reading the workspace of issue %s: %w", iss.ID, err)
	}
	if w != nil {
		if st, err := os.Stat(w.Cwd); err == nil && st.IsDir() {
			return w, nil
		}
	}
	root, err := repoRoot(ctx, *pw.Cwd)
	if err != nil {
		return nil, sdk.Unprocessable(fmt.Sprintf("Project workspace %s is not a git repository, which an isolated workspace needs: %v", *pw.Cwd, err))
	}
	s := policy.WorkspaceStrategy
	base := firstNonEmpty(s.BaseRef, deref(pw.DefaultRef), deref(pw.RepoRef), "HEAD")
	if !safeRef(base) {
		return nil, sdk.Unprocessable(fmt.Sprintf("Base ref %q of the isolated workspace is not a valid git revision", base))
	}
	if base == "HEAD" {
		// The checkout's current branch (or commit): HEAD inside the worktree would mean
		// the worktree itself when close readiness compares against the base.
		if res, err := git(ctx, root, "rev-parse", "--abbrev-ref", "HEAD"); err == nil && strings.TrimSpace(res.Stdout) != "HEAD" {
			base = strings.TrimSpace(res.Stdout)
		} else if res, err := git(ctx, root, "rev-parse", "HEAD"); err == nil {
			base = strings.TrimSpace(res.Stdout)
		}
	}
	tmpl := firstNonEmpty(s.BranchTemplate, defaultBranchTemplate)
	branch := sanitizeBranch(strings.NewReplacer("{{issue.identifier}}", iss.Identifier, "{{issue.id}}", iss.ID,
		"{{issue.title}}", iss.Title, "{{slug}}", slugify(iss.Title), "{{project.id}}", proj.ID, "{{agent.id}}", in.AgentID).Replace(tmpl))
	if branch == "" {
		branch = "keel-" + iss.ID[:8]
	}
	parent := firstNonEmpty(s.WorktreeParentDir, defaultWorktreeParent)
	if !filepath.IsAbs(parent) {
		parent = filepath.Join(root, parent)
	}
	path := filepath.Join(parent, strings.ReplaceAll(branch, "/", "-"))
	if w != nil && w.BranchName != nil && w.WorktreePath != nil {
		// Remade where it was, on the branch it had (the issue's title may have changed).
		branch, path, base = *w.BranchName, *w.WorktreePath, firstNonEmpty(deref(w.BaseRef), base)
	}
	if w == nil {
		w, err = scanWorkspace(x.pool.QueryRow(ctx, `INSERT INTO execution_workspaces (id, company_id, project_id, project_workspace_id,
			source_issue_id, mode, strategy_type, provider_type, name, cwd, repo_root, repo_url, base_ref, branch_name, worktree_path,
			created_by_runtime, config) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, true, $16)
			RETURNING `+workspaceColumns, uuid.Must(uuid.NewV7()).String(), companyID, proj.ID, pw.ID, iss.ID, ModeIsolated,
			StrategyGitWorktree, ProviderGitWorktree, nameOr(iss.Identifier, branch), path, root, pw.RepoURL, base, branch, path,
			initialConfig(pw, policy)))
		if err != nil {
			return nil, fmt.Errorf("error recording the workspace of issue %s: %w", iss.ID, err)
		}
	}
	if err := x.addWorktree(ctx, w, in.RunID, root, branch, path, base, parent == filepath.Join(root, defaultWorktreeParent)); err != nil {
		return nil, err
	}
	if cmd := firstNonEmpty(s.ProvisionCommand, deref(pw.SetupCommand)); cmd != "" {
		if err := x.runShellOperation(ctx, w, in.RunID, "workspace_provision", cmd, path); err != nil {
			return nil, sdk.Unprocessable(fmt.Sprintf("The workspace's provision command failed: %v", err))
		}
	}
	x.activity(ctx, companyID, "execution_workspace.created", w.ID, map[string]any{"issueId": iss.ID, "branchName": branch,
		"worktreePath": path, "runId": in.RunID})
	return w, nil
}

// addWorktree runs git worktree add for the workspace (a new branch from base, or the
// branch as it is when it already exists) and records the operation.
func (x *Workspaces) addWorktree(ctx context.Context, w *ExecutionWorkspace, runID, root, branch, path, base string, hideParent bool) error {
	unlock := x.repos.lock(root)
	defer unlock()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("error creating the worktree folder %s: %w", filepath.Dir(path), err)
	}
	if hideParent {
		excludeFromRepo(ctx, root, "/"+strings.SplitN(defaultWorktreeParent, "/", 2)[0]+"/")
	}
	// A worktree whose folder went away is pruned before it is made again.
	_, _ = git(ctx, root, "worktree", "prune")
	args := []string{"worktree", "add", "-b", branch, path, base}
	if _, err := git(ctx, root, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
		args = []string{"worktree", "add", path, branch}
	}
	op, err := x.operationStart(ctx, &opParams{Workspace: w, RunID: runID, Phase: "worktree_prepare",
		Command: "git " + strings.Join(args, " "), Cwd: root, Metadata: map[string]any{"branchName": branch, "baseRef": base}})
	if err != nil {
		return err
	}
	res, gerr := git(ctx, root, args...)
	code := res.ExitCode
	if gerr != nil {
		x.operationFinish(ctx, op, "failed", &code, res.Stdout, res.Stderr)
		return sdk.Unprocessable(fmt.Sprintf("The git worktree of the workspace could not be made: %v", gerr))
	}
	x.operationFinish(ctx, op, "succeeded", &code, res.Stdout, res.Stderr)
	if u := agentUser(); u != nil {
		if err := chownTree(path, u); err != nil {
			x.log.Warn("error handing a worktree to the agent user", "path", path, "error", err)
		}
	}
	return nil
}

// excludeFromRepo adds a pattern to the repository's info/exclude once, so keel's worktree
// folder inside the checkout does not show as untracked work.
func excludeFromRepo(ctx context.Context, root, pattern string) {
	res, err := git(ctx, root, "rev-parse", "--git-common-dir")
	if err != nil {
		return
	}
	dir := strings.TrimSpace(res.Stdout)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	file := filepath.Join(dir, "info", "exclude")
	b, _ := os.ReadFile(file)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == pattern {
			return
		}
	}
	_ = os.MkdirAll(filepath.Dir(file), 0o755)
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	if len(b) > 0 && !strings.HasSuffix(string(b), "\n") {
		_, _ = f.WriteString("\n")
	}
	_, _ = f.WriteString(pattern + "\n")
}

// runEnv is the run's workspace environment (REFERENCE.md 3 step 5).
func (x *Workspaces) runEnv(ctx context.Context, w *ExecutionWorkspace, proj *projectRecord, pw *projectWorkspace) (*RealizeResult, error) {
	env := map[string]string{}
	setEnv(env, "SERVICE_WORKSPACE_CWD", w.Cwd)
	setEnv(env, "SERVICE_WORKSPACE_SOURCE", SourceProjectPrimary)
	setEnv(env, "SERVICE_WORKSPACE_STRATEGY", w.StrategyType)
	setEnv(env, "SERVICE_WORKSPACE_ID", pw.ID)
	setEnv(env, "SERVICE_WORKSPACE_REPO_URL", deref(w.RepoURL))
	setEnv(env, "SERVICE_WORKSPACE_REPO_REF", deref(w.BaseRef))
	setEnv(env, "SERVICE_WORKSPACE_BRANCH", deref(w.BranchName))
	setEnv(env, "SERVICE_WORKSPACE_WORKTREE_PATH", deref(w.WorktreePath))
	env["SERVICE_WORKSPACES_JSON"] = workspacesJSON(proj)
	rc := parseRuntime(w.Config)
	if len(rc.Services) > 0 {
		b, _ := json.Marshal(rc.Services)
		env["SERVICE_RUNTIME_SERVICE_INTENTS_JSON"] = string(b)
	}
	services, err := x.servicesList(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	type running struct {
		ID          string  `json:"id"`
		ServiceName string  `json:"serviceName"`
		Status      string  `json:"status"`
		URL         *string `json:"url"`
		Port        *int    `json:"port"`
	}
	var live []running
	for _, s := range services {
		if s.Kind == kindService && s.Status == svcRunning {
			live = append(live, running{ID: s.ID, ServiceName: s.ServiceName, Status: s.Status, URL: s.URL, Port: s.Port})
			if s.URL != nil && env["SERVICE_RUNTIME_PRIMARY_URL"] == "" {
				env["SERVICE_RUNTIME_PRIMARY_URL"] = *s.URL
			}
		}
	}
	if len(live) > 0 {
		b, _ := json.Marshal(live)
		env["SERVICE_RUNTIME_SERVICES_JSON"] = string(b)
	}
	return &RealizeResult{ExecutionWorkspaceID: w.ID, Cwd: w.Cwd, Source: SourceProjectPrimary, Strategy: w.StrategyType, Env: env}, nil
}

// workspacesJSON lists the project's workspaces for SERVICE_WORKSPACES_JSON.
func workspacesJSON(p *projectRecord) string {
	type entry struct {
		WorkspaceID string  `json:"workspaceId"`
		Name        string  `json:"name"`
		Cwd         *string `json:"cwd"`
		RepoURL     *string `json:"repoUrl"`
		RepoRef     *string `json:"repoRef"`
		IsPrimary   bool    `json:"isPrimary"`
	}
	out := []entry{}
	for _, w := range p.Workspaces {
		out = append(out, entry{WorkspaceID: w.ID, Name: w.Name, Cwd: w.Cwd, RepoURL: w.RepoURL, RepoRef: w.RepoRef, IsPrimary: w.IsPrimary})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func setEnv(env map[string]string, k, v string) {
	if v != "" {
		env[k] = v
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

func nameOr(a, b string) string { return firstNonEmpty(a, b) }

// activity appends an activity entry; a failure is logged.
func (x *Workspaces) activity(ctx context.Context, companyID, action, id string, details map[string]any) {
	if err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Action: action, EntityType: "execution_workspace",
		EntityID: id, Details: details}); err != nil {
		x.log.Warn("error logging activity", "action", action, "error", err)
	}
}
