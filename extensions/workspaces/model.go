package workspaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Modes, strategies and statuses of an execution workspace.
const (
	ModeShared   = "shared_workspace"
	ModeIsolated = "isolated_workspace"

	StrategyProjectPrimary = "project_primary"
	StrategyGitWorktree    = "git_worktree"

	ProviderLocalFS     = "local_fs"
	ProviderGitWorktree = "git_worktree"

	StatusActive   = "active"
	StatusIdle     = "idle"
	StatusInReview = "in_review"
	StatusArchived = "archived"
)

// workspaceStatuses are the statuses PATCH accepts.
var workspaceStatuses = []string{StatusActive, StatusIdle, StatusInReview, StatusArchived}

// Error texts.
const (
	msgWorkspaceNotFound = "Execution workspace not found"
	msgArchived          = "Execution workspace is archived"
	msgReopen            = "Archived execution workspaces cannot be reopened"
	msgNotReady          = "Execution workspace is not ready to close"
	msgNoRuntime         = "Execution workspace has no runtime services configured"
	msgNoCommands        = "Execution workspace has no runtime commands configured"
	msgServiceNotFound   = "Runtime service not found"
)

// ExecutionWorkspace is a row of execution_workspaces and its API shape.
type ExecutionWorkspace struct {
	ID                 string          `json:"id"`
	CompanyID          string          `json:"companyId"`
	ProjectID          string          `json:"projectId"`
	ProjectWorkspaceID string          `json:"projectWorkspaceId"`
	SourceIssueID      *string         `json:"sourceIssueId"`
	Mode               string          `json:"mode"`
	StrategyType       string          `json:"strategyType"`
	ProviderType       string          `json:"providerType"`
	Name               string          `json:"name"`
	Status             string          `json:"status"`
	Cwd                string          `json:"cwd"`
	RepoRoot           *string         `json:"repoRoot"`
	RepoURL            *string         `json:"repoUrl"`
	BaseRef            *string         `json:"baseRef"`
	BranchName         *string         `json:"branchName"`
	WorktreePath       *string         `json:"worktreePath"`
	CreatedByRuntime   bool            `json:"createdByRuntime"`
	Config             json.RawMessage `json:"config"`
	Metadata           json.RawMessage `json:"metadata"`
	LastUsedAt         time.Time       `json:"lastUsedAt"`
	OpenedAt           time.Time       `json:"openedAt"`
	ClosedAt           *time.Time      `json:"closedAt"`
	CleanupReason      *string         `json:"cleanupReason"`
	CreatedAt          time.Time       `json:"createdAt"`
	UpdatedAt          time.Time       `json:"updatedAt"`
	// RuntimeServices are the workspace's runtime services and commands (detail views).
	RuntimeServices []*RuntimeService `json:"runtimeServices,omitempty"`
}

const workspaceColumns = `id::text, company_id::text, project_id::text, project_workspace_id::text, source_issue_id::text, mode,
	strategy_type, provider_type, name, status, cwd, repo_root, repo_url, base_ref, branch_name, worktree_path, created_by_runtime,
	config, metadata, last_used_at, opened_at, closed_at, cleanup_reason, created_at, updated_at`

func scanWorkspace(row pgx.Row) (*ExecutionWorkspace, error) {
	w := &ExecutionWorkspace{}
	err := row.Scan(&w.ID, &w.CompanyID, &w.ProjectID, &w.ProjectWorkspaceID, &w.SourceIssueID, &w.Mode, &w.StrategyType,
		&w.ProviderType, &w.Name, &w.Status, &w.Cwd, &w.RepoRoot, &w.RepoURL, &w.BaseRef, &w.BranchName, &w.WorktreePath,
		&w.CreatedByRuntime, &w.Config, &w.Metadata, &w.LastUsedAt, &w.OpenedAt, &w.ClosedAt, &w.CleanupReason, &w.CreatedAt, &w.UpdatedAt)
	return w, err
}

// workspaceGet reads a workspace by id; nil when there is none.
func (x *Workspaces) workspaceGet(ctx context.Context, id string) (*ExecutionWorkspace, error) {
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return nil, nil
	}
	w, err := scanWorkspace(x.pool.QueryRow(ctx, `SELECT `+workspaceColumns+` FROM execution_workspaces WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading execution workspace %s: %w", id, err)
	}
	return w, nil
}

// Operation is a row of workspace_operations and its API shape: one step that made,
// provisioned, ran something in or removed a workspace.
type Operation struct {
	ID                   string          `json:"id"`
	CompanyID            string          `json:"companyId"`
	ExecutionWorkspaceID string          `json:"executionWorkspaceId"`
	HeartbeatRunID       *string         `json:"heartbeatRunId"`
	Phase                string          `json:"phase"`
	Command              *string         `json:"command"`
	Cwd                  *string         `json:"cwd"`
	Status               string          `json:"status"`
	ExitCode             *int            `json:"exitCode"`
	StdoutExcerpt        *string         `json:"stdoutExcerpt"`
	StderrExcerpt        *string         `json:"stderrExcerpt"`
	Metadata             json.RawMessage `json:"metadata"`
	StartedAt            time.Time       `json:"startedAt"`
	FinishedAt           *time.Time      `json:"finishedAt"`
	CreatedAt            time.Time       `json:"createdAt"`
	UpdatedAt            time.Time       `json:"updatedAt"`
}

const operationColumns = `id::text, company_id::text, execution_workspace_id::text, heartbeat_run_id::text, phase, command, cwd,
	status, exit_code, stdout_excerpt, stderr_excerpt, metadata, started_at, finished_at, created_at, updated_at`

func scanOperation(row pgx.Row) (*Operation, error) {
	o := &Operation{}
	err := row.Scan(&o.ID, &o.CompanyID, &o.ExecutionWorkspaceID, &o.HeartbeatRunID, &o.Phase, &o.Command, &o.Cwd, &o.Status,
		&o.ExitCode, &o.StdoutExcerpt, &o.StderrExcerpt, &o.Metadata, &o.StartedAt, &o.FinishedAt, &o.CreatedAt, &o.UpdatedAt)
	return o, err
}

// opParams starts an operation.
type opParams struct {
	Workspace *ExecutionWorkspace
	RunID     string
	Phase     string
	Command   string
	Cwd       string
	Metadata  map[string]any
}

// operationStart records a running operation and returns its id.
func (x *Workspaces) operationStart(ctx context.Context, p *opParams) (string, error) {
	id := uuid.Must(uuid.NewV7()).String()
	meta, _ := json.Marshal(p.Metadata)
	if p.Metadata == nil {
		meta = []byte("{}")
	}
	var run *string
	if p.RunID != "" {
		run = &p.RunID
	}
	_, err := x.pool.Exec(ctx, `INSERT INTO workspace_operations (id, company_id, execution_workspace_id, heartbeat_run_id, phase,
		command, cwd, status, metadata) VALUES ($1, $2, $3, $4, $5, nullif($6, ''), nullif($7, ''), 'running', $8)`,
		id, p.Workspace.CompanyID, p.Workspace.ID, run, p.Phase, p.Command, p.Cwd, meta)
	if err != nil {
		return "", fmt.Errorf("error recording workspace operation %s: %w", p.Phase, err)
	}
	return id, nil
}

// excerptMax bounds the stdout and stderr an operation keeps.
const excerptMax = 8 << 10

// excerpt keeps the tail of an output.
func excerpt(s string) *string {
	if s == "" {
		return nil
	}
	if len(s) > excerptMax {
		s = s[len(s)-excerptMax:]
	}
	return &s
}

// operationFinish records an operation's outcome: succeeded, failed or skipped.
func (x *Workspaces) operationFinish(ctx context.Context, id, status string, exitCode *int, stdout, stderr string) {
	_, err := x.pool.Exec(context.WithoutCancel(ctx), `UPDATE workspace_operations SET status = $2, exit_code = $3, stdout_excerpt = $4,
		stderr_excerpt = $5, finished_at = now(), updated_at = now() WHERE id = $1`, id, status, exitCode, excerpt(stdout), excerpt(stderr))
	if err != nil {
		x.log.Warn("error recording the end of a workspace operation", "operation", id, "error", err)
	}
}

// operationsList lists a workspace's operations, newest first.
func (x *Workspaces) operationsList(ctx context.Context, workspaceID string, limit int) ([]*Operation, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+operationColumns+` FROM workspace_operations WHERE execution_workspace_id = $1
		ORDER BY started_at DESC, id DESC LIMIT $2`, workspaceID, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing workspace operations: %w", err)
	}
	defer rows.Close()
	out := []*Operation{}
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("error reading a workspace operation: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// RuntimeService is a row of runtime_services and its API shape: a service (long-running)
// or a command (a job run to completion) started in a workspace.
type RuntimeService struct {
	ID                   string     `json:"id"`
	CompanyID            string     `json:"companyId"`
	ExecutionWorkspaceID string     `json:"executionWorkspaceId"`
	ServiceName          string     `json:"serviceName"`
	Kind                 string     `json:"kind"`
	Status               string     `json:"status"`
	Command              string     `json:"command"`
	Cwd                  string     `json:"cwd"`
	Port                 *int       `json:"port"`
	URL                  *string    `json:"url"`
	PID                  *int       `json:"pid"`
	ExitCode             *int       `json:"exitCode"`
	StartedAt            time.Time  `json:"startedAt"`
	StoppedAt            *time.Time `json:"stoppedAt"`
	UpdatedAt            time.Time  `json:"updatedAt"`
}

const serviceColumns = `id::text, company_id::text, execution_workspace_id::text, service_name, kind, status, command, cwd, port, url,
	pid, exit_code, started_at, stopped_at, updated_at`

// servicesList lists a workspace's runtime services and commands, newest first.
func (x *Workspaces) servicesList(ctx context.Context, workspaceID string) ([]*RuntimeService, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+serviceColumns+` FROM runtime_services WHERE execution_workspace_id = $1
		ORDER BY started_at DESC, id DESC LIMIT 200`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("error listing runtime services: %w", err)
	}
	defer rows.Close()
	out := []*RuntimeService{}
	for rows.Next() {
		s := &RuntimeService{}
		if err := rows.Scan(&s.ID, &s.CompanyID, &s.ExecutionWorkspaceID, &s.ServiceName, &s.Kind, &s.Status, &s.Command, &s.Cwd,
			&s.Port, &s.URL, &s.PID, &s.ExitCode, &s.StartedAt, &s.StoppedAt, &s.UpdatedAt); err != nil {
			return nil, fmt.Errorf("error reading a runtime service: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
