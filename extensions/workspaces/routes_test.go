package workspaces_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// validationPaths checks a 400 Validation error and returns the paths of its details.
func validationPaths(t *testing.T, res *sdktest.Response) []string {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	var body struct {
		Error   string `json:"error"`
		Details []struct {
			Path string `json:"path"`
		} `json:"details"`
	}
	res.JSON(t, &body)
	require.Equal(t, "Validation error", body.Error)
	var paths []string
	for _, d := range body.Details {
		paths = append(paths, d.Path)
	}
	return paths
}

// requireError checks an error answer's status and text.
func requireError(t *testing.T, res *sdktest.Response, status int, text string) {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	require.Equal(t, text, res.Map(t)["error"], "%s", res.Body)
}

// TestSharedWorkspaceRoutes runs an issue in a project's shared (non-git) workspace with a
// desired skill, then goes through every execution-workspaces route: reads, filters,
// permissions, validation and error texts, runtime services and commands, and a close.
func TestSharedWorkspaceRoutes(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Builtins: true})
	company := h.CreateCompany("Shared Co")
	other := h.CreateCompany("Other Co")
	dir := t.TempDir()
	project, pw := createProject(t, h, company, map[string]any{"name": "docs", "sourceType": "local_path", "cwd": dir}, nil)

	// A company skill the agent wants; a name that matches nothing is noted in the run log.
	res := h.Do("POST", "/api/companies/"+company+"/skills", map[string]any{"name": "Release Notes", "description": "Write release notes",
		"markdown": "Write the notes."})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	agent := createAgent(t, h, company, "Writer", nil, map[string]any{"desiredSkills": []string{"release-notes", "no-such-skill"}})
	issue := createIssue(t, h, company, project, agent, "Write the docs")
	run := finishedRun(t, h, company, agent)
	rep := report(t, h, run["id"].(string))
	require.Equal(t, "succeeded", run["status"], "%v\n%s", run, rep.log)
	require.Equal(t, dir, rep.cwd, "the run works in the project workspace")
	require.Equal(t, dir, rep.env["SERVICE_WORKSPACE_CWD"])
	require.Equal(t, "project_primary", rep.env["SERVICE_WORKSPACE_SOURCE"])
	require.Equal(t, "project_primary", rep.env["SERVICE_WORKSPACE_STRATEGY"])
	require.Equal(t, pw, rep.env["SERVICE_WORKSPACE_ID"])
	require.Empty(t, rep.env["SERVICE_WORKSPACE_BRANCH"])
	require.Empty(t, rep.env["SERVICE_WORKSPACE_WORKTREE_PATH"])
	// The agent's desired skill reached the CLI's skills directory as real files.
	require.Len(t, rep.skills, 1, "%s", rep.log)
	require.Contains(t, rep.skills[0], "release-notes: name:")
	require.Contains(t, rep.skills[0], "Release Notes")
	require.Contains(t, rep.log, "desired skills not found in the company: no-such-skill")

	list := workspaceList(t, h, company, "?projectId="+project)
	require.Len(t, list, 1)
	ws := list[0]
	id := ws["id"].(string)
	require.Equal(t, "shared_workspace", ws["mode"])
	require.Equal(t, "project_primary", ws["strategyType"])
	require.Equal(t, pw, ws["projectWorkspaceId"])
	require.Nil(t, ws["sourceIssueId"], "a shared workspace belongs to no one issue")
	require.Len(t, workspaceList(t, h, company, "?projectWorkspaceId="+pw+"&status=active,idle"), 1)
	require.Len(t, workspaceList(t, h, company, "?issueId="+issue), 0)

	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		missing := uuid.NewString()
		for _, p := range []string{"/api/execution-workspaces/" + missing, "/api/execution-workspaces/not-a-uuid",
			"/api/execution-workspaces/" + missing + "/close-readiness", "/api/execution-workspaces/" + missing + "/workspace-operations"} {
			requireError(t, h.Do("GET", p, nil), http.StatusNotFound, "Execution workspace not found")
		}
		requireError(t, h.Do("GET", "/api/heartbeat-runs/"+missing+"/workspace-operations", nil), http.StatusNotFound, "Heartbeat run not found")
		requireError(t, h.Do("GET", "/api/heartbeat-runs/nope/workspace-operations", nil), http.StatusNotFound, "Heartbeat run not found")
		requireError(t, h.Do("PATCH", "/api/execution-workspaces/"+missing, map[string]any{"name": "x"}), http.StatusNotFound, "Execution workspace not found")
		requireError(t, h.Do("POST", "/api/execution-workspaces/"+missing+"/runtime-services/start", nil), http.StatusNotFound, "Execution workspace not found")
		requireError(t, h.Do("POST", "/api/execution-workspaces/"+missing+"/runtime-commands/run", nil), http.StatusNotFound, "Execution workspace not found")

		require.Equal(t, []string{"projectId"}, validationPaths(t, h.Do("GET", "/api/companies/"+company+"/execution-workspaces?projectId=x", nil)))
		require.Equal(t, []string{"status"}, validationPaths(t, h.Do("GET", "/api/companies/"+company+"/execution-workspaces?status=closed", nil)))
		require.ElementsMatch(t, []string{"status", "name", "metadata"}, validationPaths(t, h.Do("PATCH", "/api/execution-workspaces/"+id,
			map[string]any{"status": "closed", "name": " ", "metadata": []int{1}})))
		require.Equal(t, []string{"config"}, validationPaths(t, h.Do("PATCH", "/api/execution-workspaces/"+id,
			map[string]any{"config": map[string]any{"workspaceRuntime": map[string]any{"services": []any{map[string]any{"name": "x", "command": 5}}}}})))
		require.Equal(t, []string{"action"}, validationPaths(t, h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/explode", nil)))
		require.Equal(t, []string{"action"}, validationPaths(t, h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/run", nil)))
		require.Equal(t, []string{"runtimeServiceId"}, validationPaths(t, h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/stop",
			map[string]any{"runtimeServiceId": "x"})))
	})

	t.Run("Permissions", func(t *testing.T) {
		t.Parallel()
		outsider := h.CreateAgent(other, "Outsider", "engineer")
		insider := h.CreateAgent(company, "Insider", "engineer")
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/execution-workspaces/" + id}, {"GET", "/api/execution-workspaces/" + id + "/close-readiness"},
			{"GET", "/api/execution-workspaces/" + id + "/workspace-operations"}, {"PATCH", "/api/execution-workspaces/" + id},
			{"POST", "/api/execution-workspaces/" + id + "/runtime-services/start"}, {"POST", "/api/execution-workspaces/" + id + "/runtime-commands/run"},
			{"GET", "/api/heartbeat-runs/" + run["id"].(string) + "/workspace-operations"},
		} {
			var body any
			if c.method != "GET" {
				body = map[string]any{}
			}
			requireError(t, h.Do(c.method, c.path, body, outsider.As("")...), http.StatusForbidden, "You do not have access to this company")
		}
		require.Equal(t, http.StatusForbidden, h.Do("GET", "/api/companies/"+company+"/execution-workspaces", nil, outsider.As("")...).Status)
		require.Equal(t, http.StatusUnauthorized, h.Do("GET", "/api/execution-workspaces/"+id, nil, "Authorization", "Bearer pcp_nope").Status)
		// An agent of the company reads its workspaces.
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/execution-workspaces/"+id, nil, insider.As("")...).Status)
		require.Equal(t, http.StatusOK, h.Do("GET", "/api/companies/"+company+"/execution-workspaces", nil, insider.As("")...).Status)
	})

	t.Run("MissingFolder", func(t *testing.T) {
		t.Parallel()
		// A project workspace whose folder is not on this node: the run goes on in the
		// agent's own directory, with a note in its log.
		p2, pw2 := createProject(t, h, company, map[string]any{"name": "elsewhere", "sourceType": "local_path",
			"cwd": filepath.Join(dir, "not-here")}, nil)
		agent2 := createAgent(t, h, company, "Wanderer", nil, nil)
		createIssue(t, h, company, p2, agent2, "Work elsewhere")
		run2 := finishedRun(t, h, company, agent2)
		rep := report(t, h, run2["id"].(string))
		require.Equal(t, "succeeded", run2["status"], "%v\n%s", run2, rep.log)
		require.Contains(t, rep.log, "is not an existing directory; the run works in the agent's own directory")
		require.Equal(t, "agent_home", rep.env["SERVICE_WORKSPACE_SOURCE"])
		require.Equal(t, pw2, rep.env["SERVICE_WORKSPACE_ID"])
		require.Equal(t, rep.cwd, rep.env["SERVICE_WORKSPACE_CWD"])
		require.Len(t, workspaceList(t, h, company, "?projectId="+p2), 0)
		var ops []map[string]any
		res := h.Do("GET", "/api/heartbeat-runs/"+run2["id"].(string)+"/workspace-operations", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &ops)
		require.Empty(t, ops)
	})

	t.Run("Runtime", func(t *testing.T) {
		t.Parallel()
		requireError(t, h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/start", nil), http.StatusUnprocessableEntity,
			"Execution workspace has no runtime services configured")
		requireError(t, h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-commands/run", nil), http.StatusUnprocessableEntity,
			"Execution workspace has no runtime commands configured")
		res := h.Do("PATCH", "/api/execution-workspaces/"+id, map[string]any{"name": "Docs workspace", "metadata": map[string]any{"team": "docs"},
			"config": map[string]any{"workspaceRuntime": map[string]any{
				"services": []any{map[string]any{"name": "web", "command": []string{"sleep", "300"}, "port": 4173}},
				"commands": []any{map[string]any{"name": "build", "command": "echo built > built.txt && echo done"}}}}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "Docs workspace", res.Map(t)["name"])
		requireError(t, h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/start", map[string]any{"serviceName": "nope"}),
			http.StatusNotFound, "Runtime service not found")

		var started struct {
			RuntimeServices []map[string]any `json:"runtimeServices"`
		}
		res = h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/start", map[string]any{})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &started)
		require.Len(t, started.RuntimeServices, 1)
		web := started.RuntimeServices[0]
		require.Equal(t, "running", web["status"])
		require.Equal(t, "http://127.0.0.1:4173", web["url"])
		require.Equal(t, dir, web["cwd"])
		// Starting again leaves the running service alone.
		res = h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/start", map[string]any{"serviceName": "web"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &started)
		require.Empty(t, started.RuntimeServices)

		// The next run of the issue sees the running service.
		res = h.Do("POST", "/api/issues/"+issue+"/comments", map[string]any{"body": "And the changelog."})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		var second map[string]any
		sdktest.WaitFor(t, 150*time.Second, func() bool {
			var all []map[string]any
			h.Do("GET", "/api/companies/"+company+"/heartbeat-runs?agentId="+agent, nil).JSON(t, &all)
			for _, r := range all {
				if r["id"] != run["id"] && r["finishedAt"] != nil {
					second = r
					return true
				}
			}
			return false
		}, "the second run")
		rep2 := report(t, h, second["id"].(string))
		require.Equal(t, "http://127.0.0.1:4173", rep2.env["SERVICE_RUNTIME_PRIMARY_URL"], "%s", rep2.log)
		require.Contains(t, rep2.env["SERVICE_RUNTIME_SERVICES_JSON"], `"serviceName":"web"`)

		r := readiness(t, h, id)
		require.Equal(t, "ready_with_warnings", r["state"], "%v", r)
		require.Equal(t, true, r["isSharedWorkspace"])
		require.Contains(t, fmt.Sprint(r["warnings"]), "1 runtime service(s) or command(s) are running")

		res = h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/stop", map[string]any{"runtimeServiceId": web["id"]})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &started)
		require.Len(t, started.RuntimeServices, 1)
		require.Equal(t, "stopped", started.RuntimeServices[0]["status"])

		res = h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-commands/run", map[string]any{"commandName": "build"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res.JSON(t, &started)
		require.Len(t, started.RuntimeServices, 1)
		build := started.RuntimeServices[0]["id"]
		sdktest.WaitFor(t, 60*time.Second, func() bool {
			var w struct {
				RuntimeServices []map[string]any `json:"runtimeServices"`
			}
			h.Do("GET", "/api/execution-workspaces/"+id, nil).JSON(t, &w)
			for _, s := range w.RuntimeServices {
				if s["id"] == build {
					return s["status"] == "succeeded"
				}
			}
			return false
		}, "the build command to succeed")
		require.FileExists(t, filepath.Join(dir, "built.txt"))
		var ops []map[string]any
		h.Do("GET", "/api/execution-workspaces/"+id+"/workspace-operations?limit=10", nil).JSON(t, &ops)
		seen := map[string]bool{}
		for _, o := range ops {
			seen[o["phase"].(string)+":"+o["status"].(string)] = true
			if o["phase"] == "runtime_command" {
				require.Equal(t, "done\n", o["stdoutExcerpt"])
			}
		}
		require.True(t, seen["runtime_service_start:succeeded"], "%v", seen)
		require.True(t, seen["runtime_service_stop:succeeded"], "%v", seen)
		require.True(t, seen["runtime_command:succeeded"], "%v", seen)

		// A close of the shared workspace removes nothing; it cannot be reopened or run.
		res = h.Do("PATCH", "/api/execution-workspaces/"+id, map[string]any{"status": "archived"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, "archived", res.Map(t)["status"])
		require.DirExists(t, dir)
		_, err := os.Stat(filepath.Join(dir, "built.txt"))
		require.NoError(t, err)
		requireError(t, h.Do("PATCH", "/api/execution-workspaces/"+id, map[string]any{"status": "active"}), http.StatusConflict,
			"Archived execution workspaces cannot be reopened")
		requireError(t, h.Do("POST", "/api/execution-workspaces/"+id+"/runtime-services/start", nil), http.StatusConflict,
			"Execution workspace is archived")
		r = readiness(t, h, id)
		require.Equal(t, "blocked", r["state"])
	})
}
