package workspaces_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// fakeCLI is the absolute path of the test's stand-in CLI.
func fakeCLI(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "claude"))
	require.NoError(t, err)
	return p
}

// gitRun runs git in dir for the test and returns its trimmed output.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// testRepo makes a git repository on branch main with one commit.
func testRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gitRun(t, dir, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# repo\n"), 0o644))
	gitRun(t, dir, "add", "README.md")
	gitRun(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// createAgent creates an alpha_local agent running the fake CLI with extra env.
func createAgent(t *testing.T, h *sdktest.Host, company, name string, env map[string]any, extra map[string]any) string {
	t.Helper()
	if env == nil {
		env = map[string]any{}
	}
	env["HOME"] = t.TempDir()
	body := map[string]any{"name": name, "role": "engineer", "adapterType": "alpha_local",
		"adapterConfig": map[string]any{"command": fakeCLI(t), "timeoutSec": 180, "env": env}}
	for k, v := range extra {
		body[k] = v
	}
	res := h.Do("POST", "/api/companies/"+company+"/agents", body)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

// createProject creates a project with one workspace and a policy.
func createProject(t *testing.T, h *sdktest.Host, company string, workspace, policy map[string]any) (string, string) {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+company+"/projects", map[string]any{"name": "Repo project",
		"workspace": workspace, "executionWorkspacePolicy": policy})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	var p struct {
		ID         string `json:"id"`
		Workspaces []struct {
			ID string `json:"id"`
		} `json:"workspaces"`
	}
	res.JSON(t, &p)
	require.Len(t, p.Workspaces, 1)
	return p.ID, p.Workspaces[0].ID
}

// createIssue creates an issue of a project assigned to an agent (which wakes it).
func createIssue(t *testing.T, h *sdktest.Host, company, project, agent, title string) string {
	t.Helper()
	res := h.Do("POST", "/api/companies/"+company+"/issues", map[string]any{"title": title, "projectId": project, "assigneeAgentId": agent})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

// finishedRun waits for the agent's first finished run.
func finishedRun(t *testing.T, h *sdktest.Host, company, agent string) map[string]any {
	t.Helper()
	var run map[string]any
	sdktest.WaitFor(t, 150*time.Second, func() bool {
		var all []map[string]any
		h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+agent, nil).JSON(t, &all)
		for _, r := range all {
			if r["finishedAt"] != nil && r["status"] != "queued" && r["status"] != "running" {
				run = r
				return true
			}
		}
		return false
	}, "a finished run of agent "+agent)
	return run
}

// runReport reads the fake CLI's report from a run's log: its variables, cwd and skills.
type runReport struct {
	env    map[string]string
	cwd    string
	skills []string
	log    string
}

func report(t *testing.T, h *sdktest.Host, runID string) *runReport {
	t.Helper()
	res := h.Do("GET", "/api/heartbeat-runs/"+runID+"/log", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	r := &runReport{env: map[string]string{}, log: string(res.Body)}
	for _, line := range strings.Split(r.log, "\n") {
		if _, kv, ok := strings.Cut(line, "env: "); ok {
			k, v, _ := strings.Cut(kv, "=")
			r.env[k] = v
		}
		if _, v, ok := strings.Cut(line, "cwd: "); ok {
			r.cwd = v
		}
		if _, v, ok := strings.Cut(line, "skill: "); ok {
			r.skills = append(r.skills, v)
		}
	}
	return r
}

// workspaceList lists a company's execution workspaces.
func workspaceList(t *testing.T, h *sdktest.Host, company, query string) []map[string]any {
	t.Helper()
	res := h.Do("GET", "/api/companies/"+company+"/execution-workspaces"+query, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out []map[string]any
	res.JSON(t, &out)
	return out
}

// readiness reads a workspace's close readiness.
func readiness(t *testing.T, h *sdktest.Host, id string) map[string]any {
	t.Helper()
	res := h.Do("GET", "/api/execution-workspaces/"+id+"/close-readiness", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return res.Map(t)
}

// TestWorktrees runs two issues of one project at once, each in its own git worktree on its
// own branch, and closes them: close readiness refuses while a worktree holds uncommitted
// changes or commits that are neither pushed nor merged, and a close removes the worktree.
func TestWorktrees(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	company := h.CreateCompany("Worktree Co")
	repo := testRepo(t)
	project, pw := createProject(t, h, company,
		map[string]any{"name": "main repo", "sourceType": "git_repo", "cwd": repo, "repoUrl": "https://example.com/acme/repo.git"},
		map[string]any{"enabled": true, "defaultMode": "isolated_workspace", "workspaceStrategy": map[string]any{"type": "git_worktree"},
			"workspaceRuntime": map[string]any{"services": []any{map[string]any{"name": "web", "command": []string{"sleep", "300"}, "port": 4173}}}})
	sync := t.TempDir()
	env := map[string]any{"FAKE_SYNC_DIR": sync, "FAKE_SYNC_COUNT": "2", "FAKE_WRITE": "notes.txt"}
	agentA := createAgent(t, h, company, "Builder A", env, nil)
	agentB := createAgent(t, h, company, "Builder B", env, nil)
	issueA := createIssue(t, h, company, project, agentA, "Add the login page")
	issueB := createIssue(t, h, company, project, agentB, "Fix: the build (again)!")

	runA, runB := finishedRun(t, h, company, agentA), finishedRun(t, h, company, agentB)
	repA, repB := report(t, h, runA["id"].(string)), report(t, h, runB["id"].(string))
	require.Equal(t, "succeeded", runA["status"], "%v\n%s", runA, repA.log)
	require.Equal(t, "succeeded", runB["status"], "%v\n%s", runB, repB.log)
	// Each run waited until both had started: they ran at once.
	require.Contains(t, repA.log, "all runs started")
	require.Contains(t, repB.log, "all runs started")

	list := workspaceList(t, h, company, "")
	require.Len(t, list, 2, "%v", list)
	byIssue := map[string]map[string]any{}
	for _, w := range list {
		byIssue[w["sourceIssueId"].(string)] = w
		require.Equal(t, "isolated_workspace", w["mode"])
		require.Equal(t, "git_worktree", w["strategyType"])
		require.Equal(t, "active", w["status"])
		require.Equal(t, project, w["projectId"])
	}
	wsA, wsB := byIssue[issueA], byIssue[issueB]
	require.NotNil(t, wsA)
	require.NotNil(t, wsB)
	require.NotEqual(t, wsA["cwd"], wsB["cwd"])
	require.NotEqual(t, wsA["branchName"], wsB["branchName"])
	for _, c := range []struct {
		ws  map[string]any
		rep *runReport
	}{{wsA, repA}, {wsB, repB}} {
		cwd := c.ws["cwd"].(string)
		require.Equal(t, cwd, c.rep.cwd, "the CLI ran in its issue's worktree")
		require.True(t, strings.HasPrefix(cwd, filepath.Join(repo, ".keel", "worktrees")+"/"), cwd)
		require.Equal(t, c.ws["branchName"], gitRun(t, cwd, "rev-parse", "--abbrev-ref", "HEAD"))
		// The run-context environment, variable by variable (REFERENCE.md 3 step 5).
		e := c.rep.env
		require.Equal(t, cwd, e["SERVICE_WORKSPACE_CWD"])
		require.Equal(t, "project_primary", e["SERVICE_WORKSPACE_SOURCE"])
		require.Equal(t, "git_worktree", e["SERVICE_WORKSPACE_STRATEGY"])
		require.Equal(t, pw, e["SERVICE_WORKSPACE_ID"])
		require.Equal(t, "https://example.com/acme/repo.git", e["SERVICE_WORKSPACE_REPO_URL"])
		require.Equal(t, "main", e["SERVICE_WORKSPACE_REPO_REF"])
		require.Equal(t, c.ws["branchName"], e["SERVICE_WORKSPACE_BRANCH"])
		require.Equal(t, cwd, e["SERVICE_WORKSPACE_WORKTREE_PATH"])
		require.NotEmpty(t, e["AGENT_HOME"])
		var wss []map[string]any
		require.NoError(t, json.Unmarshal([]byte(e["SERVICE_WORKSPACES_JSON"]), &wss), e["SERVICE_WORKSPACES_JSON"])
		require.Len(t, wss, 1)
		require.Equal(t, pw, wss[0]["workspaceId"])
		require.Equal(t, repo, wss[0]["cwd"])
		require.Contains(t, e["SERVICE_RUNTIME_SERVICE_INTENTS_JSON"], `"web"`)
		require.Empty(t, e["SERVICE_RUNTIME_SERVICES_JSON"], "no service was started")
		require.Empty(t, e["SERVICE_RUNTIME_PRIMARY_URL"])
	}
	// The base is the checkout's branch (no ref was configured); the branch is named from
	// the issue, sanitised.
	require.Equal(t, "main", wsB["baseRef"])
	require.Regexp(t, `^[A-Z]+-\d+-fix-the-build-again$`, wsB["branchName"])
	worktrees := gitRun(t, repo, "worktree", "list")
	require.Contains(t, worktrees, wsA["cwd"].(string))
	require.Contains(t, worktrees, wsB["cwd"].(string))
	require.Empty(t, gitRun(t, repo, "status", "--porcelain"), "the worktrees do not show in the main checkout")

	// A: the run left an uncommitted file, so the close is refused.
	idA := wsA["id"].(string)
	r := readiness(t, h, idA)
	require.Equal(t, "blocked", r["state"], "%v", r)
	require.Contains(t, fmt.Sprint(r["blockingReasons"]), "1 untracked file(s)")
	git, _ := r["git"].(map[string]any)
	require.Equal(t, true, git["hasUntrackedFiles"])
	res := h.Do("PATCH", "/api/execution-workspaces/"+idA, map[string]any{"status": "archived"})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "Execution workspace is not ready to close", res.Map(t)["error"])
	// A tracked change blocks too.
	require.NoError(t, os.WriteFile(filepath.Join(wsA["cwd"].(string), "README.md"), []byte("# changed\n"), 0o644))
	r = readiness(t, h, idA)
	require.Contains(t, fmt.Sprint(r["blockingReasons"]), "1 uncommitted change(s) to tracked files")

	// Committed but neither pushed nor merged: still blocked.
	gitRun(t, wsA["cwd"].(string), "add", "-A")
	gitRun(t, wsA["cwd"].(string), "commit", "-q", "-m", "login page")
	r = readiness(t, h, idA)
	require.Equal(t, "blocked", r["state"], "%v", r)
	require.Contains(t, fmt.Sprint(r["blockingReasons"]), "1 commit(s) that are neither pushed nor merged into main")
	// Merged into main: the close goes ahead (with a warning: the issue is not done).
	gitRun(t, repo, "merge", "-q", "--ff-only", wsA["branchName"].(string))
	r = readiness(t, h, idA)
	require.Equal(t, "ready_with_warnings", r["state"], "%v", r)
	require.Contains(t, fmt.Sprint(r["warnings"]), "is still")
	res = h.Do("PATCH", "/api/execution-workspaces/"+idA, map[string]any{"status": "archived", "cleanupReason": "merged"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	closed := res.Map(t)
	require.Equal(t, "archived", closed["status"])
	require.NotNil(t, closed["closedAt"])
	require.NoDirExists(t, wsA["cwd"].(string))
	require.NotContains(t, gitRun(t, repo, "branch", "--list"), wsA["branchName"].(string), "the merged branch is deleted")

	// The operations log: the worktree made by A's run, then removed.
	var ops []map[string]any
	res = h.Do("GET", "/api/execution-workspaces/"+idA+"/workspace-operations", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res.JSON(t, &ops)
	phases := map[string]string{}
	for _, o := range ops {
		phases[o["phase"].(string)+" "+fmt.Sprint(o["command"])] = o["status"].(string)
	}
	require.Equal(t, "succeeded", phases["worktree_prepare git worktree add -b "+wsA["branchName"].(string)+" "+wsA["cwd"].(string)+" main"], "%v", phases)
	require.Equal(t, "succeeded", phases["worktree_cleanup git worktree remove "+wsA["cwd"].(string)], "%v", phases)
	require.Equal(t, "succeeded", phases["worktree_cleanup git branch -d "+wsA["branchName"].(string)], "%v", phases)
	require.Equal(t, runA["id"], ops[len(ops)-1]["heartbeatRunId"], "the first operation is the run's")
	res = h.Do("GET", "/api/heartbeat-runs/"+runA["id"].(string)+"/workspace-operations", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var runOps []map[string]any
	res.JSON(t, &runOps)
	require.Len(t, runOps, 1, "%v", runOps)
	require.Equal(t, "worktree_prepare", runOps[0]["phase"])
	require.Equal(t, idA, runOps[0]["executionWorkspaceId"])

	// B: its folder removed and its issue renamed, the next run of the issue remakes the
	// same worktree on the same branch.
	require.NoError(t, os.RemoveAll(wsB["cwd"].(string)))
	res = h.Do("PATCH", "/api/issues/"+issueB, map[string]any{"title": "Something else entirely"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.Do("POST", "/api/issues/"+issueB+"/comments", map[string]any{"body": "Once more."})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	var secondB map[string]any
	sdktest.WaitFor(t, 150*time.Second, func() bool {
		var all []map[string]any
		h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+agentB, nil).JSON(t, &all)
		for _, r := range all {
			if r["id"] != runB["id"] && r["finishedAt"] != nil {
				secondB = r
				return true
			}
		}
		return false
	}, "the second run of issue B")
	rep := report(t, h, secondB["id"].(string))
	require.Equal(t, "succeeded", secondB["status"], "%v\n%s", secondB, rep.log)
	require.Equal(t, wsB["cwd"], rep.cwd)
	require.Equal(t, wsB["branchName"], rep.env["SERVICE_WORKSPACE_BRANCH"])
	again := workspaceList(t, h, company, "?issueId="+issueB)
	require.Len(t, again, 1)
	require.Equal(t, wsB["id"], again[0]["id"], "the issue keeps its workspace")

	// Its untracked file removed, it closes.
	require.NoError(t, os.Remove(filepath.Join(wsB["cwd"].(string), "notes.txt")))
	require.Equal(t, "ready_with_warnings", readiness(t, h, wsB["id"].(string))["state"])
	res = h.Do("PATCH", "/api/execution-workspaces/"+wsB["id"].(string), map[string]any{"status": "archived"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NoDirExists(t, wsB["cwd"].(string))
	require.Len(t, workspaceList(t, h, company, "?status=active"), 0)
	require.Len(t, workspaceList(t, h, company, "?status=archived&issueId="+issueB), 1)
}
