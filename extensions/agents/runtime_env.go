package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// runtimeEnv builds the SERVICE_* environment of a run (REFERENCE 3 step 5): the base five
// (SERVICE_API_KEY only when a run JWT was minted) plus the wake-context variables that
// apply. SERVICE_API_URL is the API's base URL without an /api suffix.
func runtimeEnv(apiURL string, run *heartbeatRun, jwt string) map[string]string {
	env := map[string]string{
		"SERVICE_AGENT_ID":   run.AgentID,
		"SERVICE_COMPANY_ID": run.CompanyID,
		"SERVICE_API_URL":    strings.TrimSuffix(strings.TrimSuffix(apiURL, "/"), "/api"),
		"SERVICE_RUN_ID":     run.ID,
	}
	if jwt != "" {
		env["SERVICE_API_KEY"] = jwt
	}
	c := run.ContextSnapshot
	str := func(k string) string {
		if v, ok := c[k].(string); ok {
			return v
		}
		return ""
	}
	set := func(name, v string) {
		if v != "" {
			env[name] = v
		}
	}
	task := str("taskId")
	if task == "" {
		task = str("issueId")
	}
	set("SERVICE_TASK_ID", task)
	set("SERVICE_WAKE_REASON", str("wakeReason"))
	set("SERVICE_WAKE_COMMENT_ID", str("commentId"))
	set("SERVICE_APPROVAL_ID", str("approvalId"))
	set("SERVICE_APPROVAL_STATUS", str("approvalStatus"))
	switch ids := c["linkedIssueIds"].(type) {
	case []any:
		parts := make([]string, 0, len(ids))
		for _, id := range ids {
			if s, ok := id.(string); ok && s != "" {
				parts = append(parts, s)
			}
		}
		set("SERVICE_LINKED_ISSUE_IDS", strings.Join(parts, ","))
	case string:
		set("SERVICE_LINKED_ISSUE_IDS", ids)
	}
	if p, ok := c["payload"].(map[string]any); ok && len(p) > 0 {
		if b, err := json.Marshal(p); err == nil {
			env["SERVICE_WAKE_PAYLOAD_JSON"] = string(b)
		}
	}
	return env
}

// secretsUnavailableError fails a run whose config env references a secret while no secrets
// extension is loaded.
type secretsUnavailableError struct{ name string }

func (e *secretsUnavailableError) Error() string {
	return fmt.Sprintf("adapterConfig.env.%s references a secret, but no secrets extension is loaded to resolve it", e.name)
}

// resolveConfig returns the adapter config with its env bindings resolved to plain strings
// through "secrets.resolveEnv". Without a secrets extension plain bindings pass and a secret
// reference fails the run. SERVICE_* names in config env never override the runtime ones
// (the caller merges runtime env last) and SERVICE_API_KEY is dropped.
func (a *Agents) resolveConfig(ctx context.Context, run *heartbeatRun, config map[string]any) (map[string]any, error) {
	given, _ := config["env"].(map[string]any)
	if len(given) == 0 {
		return config, nil
	}
	// SERVICE_* names are assigned at run time: config may not set them (REFERENCE.md 2.9),
	// so they are dropped here, before resolution, with a note in the run log.
	raw := make(map[string]any, len(given))
	var dropped []string
	for k, v := range given {
		if strings.HasPrefix(k, "SERVICE_") {
			dropped = append(dropped, k)
			continue
		}
		raw[k] = v
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		a.systemEvent(ctx, run.ID, "ignored adapterConfig.env entries that keel assigns at run time: "+strings.Join(dropped, ", "))
	}
	var resolved map[string]string
	var out struct {
		Env map[string]string `json:"env"`
	}
	err := a.host.Call(ctx, "secrets.resolveEnv", sdk.SystemActor(), run.CompanyID, map[string]any{
		"companyId": run.CompanyID, "env": raw, "consumer": map[string]string{"type": "run", "id": run.ID},
	}, &out)
	switch {
	case err == nil:
		resolved = out.Env
		if resolved == nil {
			resolved = map[string]string{}
		}
	case sdk.IsMethodNotProvided(err):
		resolved = map[string]string{}
		names := make([]string, 0, len(raw))
		for k := range raw {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			switch v := raw[k].(type) {
			case string:
				resolved[k] = v
			case map[string]any:
				if t, _ := v["type"].(string); t == "plain" {
					s, _ := v["value"].(string)
					resolved[k] = s
					continue
				}
				return nil, &secretsUnavailableError{name: k}
			default:
				return nil, fmt.Errorf("adapterConfig.env.%s must be a string or a binding object", k)
			}
		}
	default:
		return nil, fmt.Errorf("error resolving adapterConfig.env: %w", err)
	}
	delete(resolved, "SERVICE_API_KEY")
	a.engine.secrets.set(run.ID, secretEnvValues(raw, resolved))
	cp := make(map[string]any, len(config))
	for k, v := range config {
		cp[k] = v
	}
	env := make(map[string]any, len(resolved))
	for k, v := range resolved {
		env[k] = v
	}
	cp["env"] = env
	return cp, nil
}

// runWorkspace resolves the working directory of an issue run through the workspaces owner
// ("workspaces.realize", REFERENCE.md 3 step 4): the project workspace, a git worktree of it
// on the issue's own branch, or, with no project workspace, the agent's own directory
// (which the adapter makes). Its SERVICE_WORKSPACE_* and SERVICE_RUNTIME_* variables join
// the run's environment. Runs without an issue, and hosts without a workspaces extension,
// leave the directory to the adapter. An error fails the run.
func (a *Agents) runWorkspace(ctx context.Context, run *heartbeatRun, req *adapter.ExecuteRequest) error {
	issueID, _ := run.ContextSnapshot["issueId"].(string)
	if issueID == "" {
		return nil
	}
	var out struct {
		ExecutionWorkspaceID string            `json:"executionWorkspaceId"`
		Cwd                  string            `json:"cwd"`
		Strategy             string            `json:"strategy"`
		Env                  map[string]string `json:"env"`
		Warning              string            `json:"warning"`
	}
	err := a.host.Call(ctx, "workspaces.realize", sdk.SystemActor(), run.CompanyID,
		map[string]any{"runId": run.ID, "agentId": run.AgentID, "issueId": issueID}, &out)
	if sdk.IsMethodNotProvided(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error preparing the run's workspace: %w", err)
	}
	for k, v := range out.Env {
		if strings.HasPrefix(k, "SERVICE_WORKSPACE") || strings.HasPrefix(k, "SERVICE_RUNTIME_") {
			req.Env[k] = v
		}
	}
	if out.Warning != "" {
		a.systemEvent(ctx, run.ID, "warning: "+out.Warning)
	}
	if out.Cwd != "" {
		a.systemEvent(ctx, run.ID, fmt.Sprintf("workspace %s (%s): %s", out.ExecutionWorkspaceID, out.Strategy, out.Cwd))
	}
	return nil
}
