package agents

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(route{Method: "POST", Path: "/api/agents/{agentId}/skills/sync", Response: new(map[string]any), Body: skillsSyncBody{},
		Summary: "Replace an agent's desired skill set (a comma list or an array)", Handle: handleSkillsSync})
}

// skillsSyncBody is the body of POST /api/agents/{agentId}/skills/sync; desiredSkills is
// a comma-separated string or an array of skill names.
type skillsSyncBody struct {
	DesiredSkills json.RawMessage `json:"desiredSkills" jsonschema:"required"`
}

// parseSkills reads a comma list or an array of skill names.
func parseSkills(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalid("desiredSkills", "is required")
	}
	var list []string
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("desiredSkills", "must be a comma-separated string or an array of strings")
		}
		list = strings.Split(s, ",")
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("desiredSkills", "must be a comma-separated string or an array of strings")
	}
	return normalizeSkills(list), nil
}

// handleSkillsSync serves POST /api/agents/{agentId}/skills/sync: the agent itself, board
// actors and agents that may manage agents replace the desired skill set.
func handleSkillsSync(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.loadAgent(ctx, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	var body skillsSyncBody
	if err := decodeBody(r, &body); err != nil {
		a.writeErr(rw, err)
		return
	}
	skills, err := parseSkills(body.DesiredSkills)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if act := sdk.ActorFrom(ctx); !(act.Type == "agent" && act.AgentId == ag.ID.Id) {
		if err := a.requireConfigWriter(ctx, ag); err != nil {
			a.writeErr(rw, err)
			return
		}
	}
	if ag.ID.Status == statusTerminated {
		a.writeErr(rw, conflict("Terminated agents cannot be changed"))
		return
	}
	cfg := *ag.Cfg
	cfg.DesiredSkills = mustJSON(skills)
	changed := changedKeys(ag.Cfg.snapshot(ag.ID), cfg.snapshot(ag.ID))
	if err := a.saveWithRevision(ctx, ag, &cfg, "skills_sync", nil, changed); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.activity(ctx, ag.ID.CompanyId, "agent.skills_synced", "agent", ag.ID.Id,
		map[string]any{"desiredSkills": skills}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"agentId": ag.ID.Id, "desiredSkills": skills})
}
