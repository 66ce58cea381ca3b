package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
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

// runSkill is the part of a skill the run's skill resolution reads from the skills owner.
type runSkill struct {
	ID        string `json:"id"`
	Key       string `json:"key"`
	Slug      string `json:"slug"`
	Name      string `json:"name"`
	LocalPath string `json:"localPath"`
}

// runSkills resolves the agent's desired skills for a run through the skills owner: each
// name matches a company skill's key, slug or name (case-insensitively), and the skill's
// files are materialised on this node ("skills.get" with materialize) for the adapter to
// hand to its CLI. Without a skills extension the run gets none; a name that matches no
// skill, or a skill that cannot be materialised, is noted in the run log and skipped.
func (a *Agents) runSkills(ctx context.Context, run *heartbeatRun, desired []string) []adapter.Skill {
	if len(desired) == 0 {
		return nil
	}
	var list struct {
		Skills []runSkill `json:"skills"`
	}
	err := a.host.Call(ctx, "skills.list", sdk.SystemActor(), run.CompanyID, map[string]any{}, &list)
	if sdk.IsMethodNotProvided(err) {
		return nil
	}
	if err != nil {
		a.systemEvent(ctx, run.ID, "warning: could not read the agent's skills: "+err.Error())
		return nil
	}
	var out []adapter.Skill
	var missing []string
	for _, want := range desired {
		w := strings.ToLower(strings.TrimSpace(want))
		var found *runSkill
		for i := range list.Skills {
			s := &list.Skills[i]
			if w == s.Key || w == s.Slug || w == strings.ToLower(s.Name) {
				found = s
				break
			}
		}
		if found == nil {
			missing = append(missing, want)
			continue
		}
		var got runSkill
		if err := a.host.Call(ctx, "skills.get", sdk.SystemActor(), run.CompanyID,
			map[string]any{"skillId": found.ID, "materialize": true}, &got); err != nil || got.LocalPath == "" {
			a.systemEvent(ctx, run.ID, fmt.Sprintf("warning: could not materialise skill %s: %v", found.Key, err))
			continue
		}
		name := found.Slug
		if name == "" {
			name = found.ID
		}
		out = append(out, adapter.Skill{Name: name, Path: got.LocalPath})
	}
	if len(missing) > 0 {
		a.systemEvent(ctx, run.ID, "warning: desired skills not found in the company: "+strings.Join(missing, ", "))
	}
	return out
}
