package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/agents/me", Response: new(agentRecord), Access: sdk.AccessAgent,
			Summary: "The calling agent with chainOfCommand and access", Handle: handleMe},
		route{Method: "GET", Path: "/api/agents/me/inbox-lite", Response: new([]inboxItem), Access: sdk.AccessAgent,
			Summary: "The calling agent's open assignments in compact form", Handle: handleInboxLite},
		route{Method: "GET", Path: "/api/agents/me/secrets", Response: new(map[string]any), Access: sdk.AccessAgent,
			Summary: "The secrets granted to the calling agent (metadata only)", Handle: handleMySecrets},
		route{Method: "POST", Path: "/api/agents/me/secrets/{key}/value", Access: sdk.AccessAgent,
			Summary: "Read a granted secret's value (needs a run context)", Handle: handleMySecretValue},
	)
}

// inboxStatuses are the issue statuses inbox-lite lists.
var inboxStatuses = []string{"todo", "in_progress", "in_review", "blocked"}

// inboxItem is one inbox-lite entry (spec "Inbox-lite item").
type inboxItem struct {
	ID                        string   `json:"id"`
	Identifier                *string  `json:"identifier"`
	Title                     string   `json:"title"`
	Status                    string   `json:"status"`
	Priority                  string   `json:"priority"`
	ProjectID                 *string  `json:"projectId"`
	GoalID                    *string  `json:"goalId"`
	ParentID                  *string  `json:"parentId"`
	UpdatedAt                 string   `json:"updatedAt"`
	ActiveRun                 any      `json:"activeRun"`
	DependencyReady           bool     `json:"dependencyReady"`
	UnresolvedBlockerCount    int      `json:"unresolvedBlockerCount"`
	UnresolvedBlockerIssueIDs []string `json:"unresolvedBlockerIssueIds"`
}

// handleMe serves GET /api/agents/me.
func handleMe(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.loadAgent(ctx, sdk.ActorFrom(ctx).AgentId)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	a.writeAgent(ctx, rw, http.StatusOK, ag, true)
}

// handleInboxLite serves GET /api/agents/me/inbox-lite from the work extension's issues.
func handleInboxLite(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	actor := sdk.ActorFrom(ctx)
	var issues []inboxItem
	err := a.host.Call(ctx, "work.issues.list", actor, actor.CompanyId, map[string]any{
		"companyId": actor.CompanyId, "assigneeAgentId": actor.AgentId, "status": inboxStatuses,
		"limit": 500,
	}, &issues)
	if sdk.IsMethodNotProvided(err) {
		issues, err = nil, nil
	}
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	out := make([]inboxItem, 0, len(issues))
	for _, it := range issues {
		ready, blockers, err := a.blockers(ctx, actor, it.ID)
		if err != nil {
			a.writeErr(rw, err)
			return
		}
		it.DependencyReady, it.UnresolvedBlockerIssueIDs, it.UnresolvedBlockerCount = ready, blockers, len(blockers)
		it.ActiveRun = nil
		out = append(out, it)
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// blockers asks the work extension whether an issue's blockers are resolved.
func (a *Agents) blockers(ctx context.Context, actor *sdk.Actor, issueID string) (bool, []string, error) {
	var res struct {
		Resolved                  bool     `json:"resolved"`
		UnresolvedBlockerIssueIDs []string `json:"unresolvedBlockerIssueIds"`
	}
	if err := a.host.Call(ctx, "work.blockers.resolve", actor, actor.CompanyId, map[string]any{"issueId": issueID}, &res); err != nil {
		return false, nil, err
	}
	if res.UnresolvedBlockerIssueIDs == nil {
		res.UnresolvedBlockerIssueIDs = []string{}
	}
	return res.Resolved, res.UnresolvedBlockerIssueIDs, nil
}

// secretsUnavailable maps a missing secrets extension to 503.
func secretsUnavailable(err error) error {
	if sdk.IsMethodNotProvided(err) {
		return apiError(http.StatusServiceUnavailable, "Secrets are not available")
	}
	return err
}

// requireRunContext refuses (403) agent calls that do not act in a live run of their own:
// the run id (X-Service-Run-Id or the run JWT's claim) must name a running heartbeat run
// of the calling agent.
func (a *Agents) requireRunContext(ctx context.Context) error {
	actor := sdk.ActorFrom(ctx)
	if actor.RunId == "" || !isUUID(actor.RunId) {
		return forbidden("Agent run context required")
	}
	var live bool
	if err := a.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM heartbeat_runs WHERE id = $1 AND agent_id = $2 AND status = 'running')`,
		actor.RunId, actor.AgentId).Scan(&live); err != nil {
		return fmt.Errorf("error verifying run %s: %w", actor.RunId, err)
	}
	if !live {
		return forbidden("Agent run context required: the run is not a live run of this agent")
	}
	return nil
}

// handleMySecrets serves GET /api/agents/me/secrets through "secrets.grantedForAgent".
func handleMySecrets(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := a.requireRunContext(ctx); err != nil {
		a.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	refs, err := a.configSecretRefs(ctx, actor.AgentId)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	var res json.RawMessage
	if err := a.host.Call(ctx, "secrets.grantedForAgent", actor, actor.CompanyId, map[string]any{"agentId": actor.AgentId,
		"configRefs": refs}, &res); err != nil {
		a.writeErr(rw, secretsUnavailable(err))
		return
	}
	// The owner answers {secrets: [...]} or a bare array; the route always answers the object.
	var wrapped struct {
		Secrets json.RawMessage `json:"secrets"`
	}
	if len(res) > 0 && res[0] == '[' {
		wrapped.Secrets = res
	} else if json.Unmarshal(res, &wrapped) != nil || wrapped.Secrets == nil {
		wrapped.Secrets = json.RawMessage(`[]`)
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"secrets": wrapped.Secrets})
}

// handleMySecretValue serves POST /api/agents/me/secrets/{key}/value through
// "secrets.valueForAgent"; the answer is never cached.
func handleMySecretValue(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rw.Header().Set("Cache-Control", "no-store")
	if err := a.requireRunContext(ctx); err != nil {
		a.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(ctx)
	refs, err := a.configSecretRefs(ctx, actor.AgentId)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	var res json.RawMessage
	err = a.host.Call(ctx, "secrets.valueForAgent", actor, actor.CompanyId, map[string]any{
		"agentId": actor.AgentId, "key": r.PathValue("key"), "runId": actor.RunId, "lowTrust": actor.KeyScope == "skill_test",
		"configRefs": refs,
	}, &res)
	if err != nil {
		a.writeErr(rw, secretsUnavailable(err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, res)
}

// configSecretRef is one secret_ref binding of an agent's adapterConfig.env, as sent to the
// secrets extension.
type configSecretRef struct {
	SecretID string          `json:"secretId"`
	Version  json.RawMessage `json:"version,omitempty"`
}

// configSecretRefs returns the secret_ref bindings of the agent's adapterConfig.env: the
// secrets extension counts them as granted secrets (the reference product does), beside
// explicit bindings. Plain values and malformed entries are skipped.
func (a *Agents) configSecretRefs(ctx context.Context, agentID string) ([]configSecretRef, error) {
	cfg, err := a.loadConfig(ctx, a.db, agentID)
	if err != nil || cfg == nil {
		return nil, err
	}
	return envSecretRefs(cfg.AdapterConfig), nil
}

// envSecretRefs returns the secret_ref bindings of an adapterConfig's env, sorted by
// variable name; plain values and malformed entries are skipped.
func envSecretRefs(adapterConfig json.RawMessage) []configSecretRef {
	var ac struct {
		Env map[string]json.RawMessage `json:"env"`
	}
	refs := []configSecretRef{}
	if json.Unmarshal(adapterConfig, &ac) != nil {
		return refs
	}
	names := make([]string, 0, len(ac.Env))
	for name := range ac.Env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var b struct {
			Type     string          `json:"type"`
			SecretID string          `json:"secretId"`
			Version  json.RawMessage `json:"version"`
		}
		if json.Unmarshal(ac.Env[name], &b) == nil && b.Type == "secret_ref" && isUUID(b.SecretID) {
			refs = append(refs, configSecretRef{SecretID: b.SecretID, Version: b.Version})
		}
	}
	return refs
}
