package workspaces

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// Close readiness states.
const (
	ReadyState        = "ready"
	ReadyWithWarnings = "ready_with_warnings"
	BlockedState      = "blocked"
)

// CloseReadiness says whether a workspace can be closed (PATCH status archived) and what a
// close would do.
type CloseReadiness struct {
	WorkspaceID string `json:"workspaceId"`
	// State is ready, ready_with_warnings or blocked.
	State           string   `json:"state"`
	BlockingReasons []string `json:"blockingReasons"`
	Warnings        []string `json:"warnings"`
	// IsSharedWorkspace says the workspace is the project workspace itself: a close
	// removes nothing on disk.
	IsSharedWorkspace bool              `json:"isSharedWorkspace"`
	LinkedIssues      []linkedIssue     `json:"linkedIssues"`
	PlannedActions    []plannedAction   `json:"plannedActions"`
	Git               *gitState         `json:"git"`
	RuntimeServices   []*RuntimeService `json:"runtimeServices"`
}

// linkedIssue is an issue the workspace was made for.
type linkedIssue struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// plannedAction is one step a close would take.
type plannedAction struct {
	Kind        string `json:"kind"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Command     string `json:"command,omitempty"`
}

// readiness checks a workspace for work a close would lose: for a worktree keel made,
// uncommitted changes (tracked or untracked) and commits that are neither pushed to a
// remote nor merged into the base ref block the close.
func (x *Workspaces) readiness(ctx context.Context, w *ExecutionWorkspace) (*CloseReadiness, error) {
	res := &CloseReadiness{WorkspaceID: w.ID, BlockingReasons: []string{}, Warnings: []string{}, LinkedIssues: []linkedIssue{},
		PlannedActions: []plannedAction{}, IsSharedWorkspace: w.Mode == ModeShared, RuntimeServices: []*RuntimeService{}}
	block := func(s string) { res.BlockingReasons = append(res.BlockingReasons, s) }
	warn := func(s string) { res.Warnings = append(res.Warnings, s) }
	plan := func(kind, label, desc, cmd string) {
		res.PlannedActions = append(res.PlannedActions, plannedAction{Kind: kind, Label: label, Description: desc, Command: cmd})
	}
	if w.Status == StatusArchived {
		block("The execution workspace is already archived")
	}
	if w.SourceIssueID != nil {
		var briefs []linkedIssue
		if err := x.host.Call(ctx, "work.issues.briefs", sdk.SystemActor(), w.CompanyID,
			map[string]any{"issueIds": []string{*w.SourceIssueID}}, &briefs); err != nil {
			x.log.Warn("error reading a workspace's issue", "workspace", w.ID, "error", err)
		}
		for _, b := range briefs {
			res.LinkedIssues = append(res.LinkedIssues, b)
			if b.Status != "done" && b.Status != "cancelled" {
				warn(fmt.Sprintf("Issue %s is still %s", b.Identifier, b.Status))
			}
		}
	}
	services, err := x.servicesList(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	for _, s := range services {
		if s.Status == svcRunning {
			res.RuntimeServices = append(res.RuntimeServices, s)
		}
	}
	if n := len(res.RuntimeServices); n > 0 {
		warn(fmt.Sprintf("%d runtime service(s) or command(s) are running and will be stopped", n))
		plan("stop_runtime_services", "Stop runtime services", fmt.Sprintf("Stop the %d running runtime service(s) and command(s)", n), "")
	}
	_, statErr := os.Stat(w.Cwd)
	switch {
	case statErr != nil && w.Mode == ModeIsolated:
		warn("The worktree folder " + w.Cwd + " is gone")
	case statErr != nil:
		warn("The workspace folder " + w.Cwd + " is gone")
	default:
		st, err := readGitState(ctx, w.Cwd, deref(w.BaseRef))
		if err == nil {
			st.CreatedByRuntime = w.CreatedByRuntime
			res.Git = st
		}
		switch {
		case err != nil && w.Mode == ModeIsolated:
			block("The worktree's git state cannot be read: " + err.Error())
		case err != nil:
			// A shared folder that is not a git checkout: nothing to check.
		case w.Mode == ModeShared:
			if st.DirtyEntryCount+st.UntrackedEntryCount > 0 {
				warn(fmt.Sprintf("The project workspace has %d uncommitted change(s); a close leaves them in place", st.DirtyEntryCount+st.UntrackedEntryCount))
			}
		default:
			if st.DirtyEntryCount > 0 {
				block(fmt.Sprintf("The worktree has %d uncommitted change(s) to tracked files", st.DirtyEntryCount))
			}
			if st.UntrackedEntryCount > 0 {
				block(fmt.Sprintf("The worktree has %d untracked file(s)", st.UntrackedEntryCount))
			}
			if st.AheadCount > 0 {
				branch := deref(w.BranchName)
				block(fmt.Sprintf("Branch %s has %d commit(s) that are neither pushed nor merged into %s", branch, st.AheadCount, deref(w.BaseRef)))
			}
		}
	}
	if cmd := parseCleanup(w); cmd != "" && statErr == nil {
		plan("cleanup_command", "Run the cleanup command", "Run the workspace's cleanup command in "+w.Cwd, cmd)
	}
	if w.Mode == ModeIsolated && w.CreatedByRuntime {
		if statErr == nil {
			plan("git_worktree_remove", "Remove the worktree", "Remove the git worktree at "+w.Cwd, "git worktree remove "+w.Cwd)
		}
		if b := deref(w.BranchName); b != "" {
			plan("git_branch_delete", "Delete the branch if merged", "Delete branch "+b+" when it is fully merged (kept otherwise)", "git branch -d "+b)
		}
	}
	plan("archive_record", "Archive the workspace", "Mark the execution workspace archived", "")
	switch {
	case len(res.BlockingReasons) > 0:
		res.State = BlockedState
	case len(res.Warnings) > 0:
		res.State = ReadyWithWarnings
	default:
		res.State = ReadyState
	}
	return res, nil
}

// parseCleanup is the workspace's cleanup command.
func parseCleanup(w *ExecutionWorkspace) string {
	var c workspaceConfig
	_ = jsonUnmarshal(w.Config, &c)
	return strings.TrimSpace(c.CleanupCommand)
}

// close archives a workspace once readiness allows it: runtime services stop, the cleanup
// command runs, a worktree keel made is removed and its branch deleted when merged.
func (x *Workspaces) close(ctx context.Context, w *ExecutionWorkspace, reason string) (*ExecutionWorkspace, error) {
	ready, err := x.readiness(ctx, w)
	if err != nil {
		return nil, err
	}
	if ready.State == BlockedState {
		return nil, &sdk.Error{Status: http.StatusConflict, Message: msgNotReady, Code: "execution_workspace_not_ready",
			Details: map[string]any{"blockingReasons": ready.BlockingReasons}}
	}
	for _, s := range ready.RuntimeServices {
		if _, err := x.stopRuntime(ctx, w, s); err != nil {
			return nil, err
		}
	}
	_, statErr := os.Stat(w.Cwd)
	if cmd := parseCleanup(w); cmd != "" && statErr == nil {
		if err := x.runShellOperation(ctx, w, "", "workspace_teardown", cmd, w.Cwd); err != nil {
			x.log.Warn("a workspace's cleanup command failed", "workspace", w.ID, "error", err)
		}
	}
	if w.Mode == ModeIsolated && w.CreatedByRuntime && w.RepoRoot != nil {
		if err := x.removeWorktree(ctx, w, statErr == nil); err != nil {
			return nil, err
		}
	}
	if reason == "" {
		reason = "closed"
	}
	if _, err := x.pool.Exec(ctx, `UPDATE execution_workspaces SET status = 'archived', closed_at = now(), cleanup_reason = $2,
		updated_at = now() WHERE id = $1`, w.ID, reason); err != nil {
		return nil, fmt.Errorf("error archiving execution workspace %s: %w", w.ID, err)
	}
	x.activity(ctx, w.CompanyID, "execution_workspace.closed", w.ID, map[string]any{"reason": reason})
	return x.workspaceGet(ctx, w.ID)
}

// removeWorktree removes a worktree keel made (when its folder is still there) and deletes
// its branch when fully merged, recording both.
func (x *Workspaces) removeWorktree(ctx context.Context, w *ExecutionWorkspace, present bool) error {
	root := *w.RepoRoot
	unlock := x.repos.lock(root)
	defer unlock()
	steps := [][]string{{"worktree", "prune"}}
	if present {
		steps = [][]string{{"worktree", "remove", w.Cwd}}
	}
	if b := deref(w.BranchName); b != "" {
		steps = append(steps, []string{"branch", "-d", b})
	}
	for i, args := range steps {
		op, err := x.operationStart(ctx, &opParams{Workspace: w, Phase: "worktree_cleanup", Command: "git " + strings.Join(args, " "), Cwd: root})
		if err != nil {
			return err
		}
		res, gerr := git(ctx, root, args...)
		code := res.ExitCode
		if gerr == nil {
			x.operationFinish(ctx, op, "succeeded", &code, res.Stdout, res.Stderr)
			continue
		}
		if args[0] == "branch" {
			// An unmerged (but pushed) branch is kept.
			x.operationFinish(ctx, op, "skipped", &code, res.Stdout, res.Stderr)
			continue
		}
		x.operationFinish(ctx, op, "failed", &code, res.Stdout, res.Stderr)
		if i == 0 && present {
			return &sdk.Error{Status: http.StatusConflict, Message: msgNotReady, Code: "execution_workspace_not_ready",
				Details: map[string]any{"blockingReasons": []string{"git worktree remove failed: " + strings.TrimSpace(res.Stderr)}}}
		}
	}
	return nil
}

func jsonUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}
