package agents

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/agents/{agentId}/config-revisions", Response: new([]*configRevision),
			Summary: "List an agent's configuration revisions, newest first", Handle: handleRevisionList},
		route{Method: "POST", Path: "/api/agents/{agentId}/config-revisions/{revisionId}/rollback", Response: new(agentRecord),
			Summary: "Restore the configuration recorded by a revision", Handle: handleRevisionRollback},
	)
}

// configRevision is one recorded change of an agent's configuration.
type configRevision struct {
	bun.BaseModel `bun:"table:agent_config_revisions"`

	ID                       string          `bun:"id,pk,type:uuid" json:"id"`
	CompanyID                string          `bun:"company_id,type:uuid" json:"companyId"`
	AgentID                  string          `bun:"agent_id,type:uuid" json:"agentId"`
	Source                   string          `bun:"source" json:"source"`
	ChangedKeys              json.RawMessage `bun:"changed_keys,type:jsonb" json:"changedKeys"`
	BeforeConfig             json.RawMessage `bun:"before_config,type:jsonb" json:"beforeConfig"`
	AfterConfig              json.RawMessage `bun:"after_config,type:jsonb" json:"afterConfig"`
	RolledBackFromRevisionID *string         `bun:"rolled_back_from_revision_id,type:uuid" json:"rolledBackFromRevisionId"`
	CreatedByAgentID         *string         `bun:"created_by_agent_id,type:uuid" json:"createdByAgentId"`
	CreatedByUserID          *string         `bun:"created_by_user_id" json:"createdByUserId"`
	CreatedAt                time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp" json:"createdAt"`
}

func timeNow() time.Time { return time.Now().UTC() }

// saveWithRevision saves cfg and, when changed is not empty, records a revision from the
// agent's current configuration to cfg, in one transaction.
func (a *Agents) saveWithRevision(ctx context.Context, ag *agentRef, cfg *configRow, source string, rolledBackFrom *string, changed []string) error {
	return a.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := a.saveConfig(ctx, tx, cfg); err != nil {
			return err
		}
		if len(changed) == 0 {
			return nil
		}
		byAgent, byUser := actorIDs(ctx)
		rev := &configRevision{
			ID: uuid.NewString(), CompanyID: ag.ID.CompanyId, AgentID: ag.ID.Id, Source: source,
			ChangedKeys: mustJSON(changed), BeforeConfig: mustJSON(ag.Cfg.snapshot(ag.ID)), AfterConfig: mustJSON(cfg.snapshot(ag.ID)),
			RolledBackFromRevisionID: rolledBackFrom, CreatedByAgentID: byAgent, CreatedByUserID: byUser, CreatedAt: timeNow(),
		}
		if _, err := tx.NewInsert().Model(rev).Exec(ctx); err != nil {
			return fmt.Errorf("error recording configuration revision of agent %s: %w", ag.ID.Id, err)
		}
		return nil
	})
}

// handleRevisionList serves GET /api/agents/{agentId}/config-revisions.
func handleRevisionList(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.loadAgent(ctx, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if ok, err := a.canReadConfig(ctx, ag.ID.CompanyId, ag.ID.Id); err != nil || !ok {
		if err == nil {
			err = forbidden("Missing permission agents:create for this company")
		}
		a.writeErr(rw, err)
		return
	}
	limit, offset, err := page(r, 50, 500)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	list := []*configRevision{}
	if err := a.db.NewSelect().Model(&list).Where("agent_id = ?", ag.ID.Id).OrderExpr("created_at DESC, id DESC").
		Limit(int64(limit)).Offset(int64(offset)).Scan(ctx); err != nil {
		a.writeErr(rw, fmt.Errorf("error listing configuration revisions of agent %s: %w", ag.ID.Id, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

// handleRevisionRollback serves POST /api/agents/{agentId}/config-revisions/{revisionId}/rollback:
// the configuration recorded after the revision's change is restored (name and role, which
// the kernel owns, are not) and recorded as a new revision with source rollback.
func handleRevisionRollback(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.loadAgent(ctx, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.requireConfigWriter(ctx, ag); err != nil {
		a.writeErr(rw, err)
		return
	}
	if ag.ID.Status == statusTerminated {
		a.writeErr(rw, conflict("Terminated agents cannot be changed"))
		return
	}
	revID := r.PathValue("revisionId")
	rev := new(configRevision)
	if !isUUID(revID) {
		a.writeErr(rw, notFound("Config revision not found"))
		return
	}
	err = a.db.NewSelect().Model(rev).Where("id = ? AND agent_id = ?", revID, ag.ID.Id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		a.writeErr(rw, notFound("Config revision not found"))
		return
	}
	if err != nil {
		a.writeErr(rw, fmt.Errorf("error reading configuration revision %s: %w", revID, err))
		return
	}
	var snap struct {
		Title                *string         `json:"title"`
		Icon                 *string         `json:"icon"`
		ReportsTo            *string         `json:"reportsTo"`
		Capabilities         *string         `json:"capabilities"`
		AdapterType          string          `json:"adapterType"`
		AdapterConfig        json.RawMessage `json:"adapterConfig"`
		RuntimeConfig        json.RawMessage `json:"runtimeConfig"`
		BudgetMonthlyCents   int64           `json:"budgetMonthlyCents"`
		Metadata             json.RawMessage `json:"metadata"`
		DefaultEnvironmentID *string         `json:"defaultEnvironmentId"`
		DesiredSkills        []string        `json:"desiredSkills"`
	}
	if err := json.Unmarshal(rev.AfterConfig, &snap); err != nil {
		a.writeErr(rw, fmt.Errorf("error decoding configuration revision %s: %w", revID, err))
		return
	}
	cfg := *ag.Cfg
	cfg.Title, cfg.Icon, cfg.Capabilities, cfg.DefaultEnvironmentID = snap.Title, snap.Icon, snap.Capabilities, snap.DefaultEnvironmentID
	cfg.AdapterType, cfg.BudgetMonthlyCents = snap.AdapterType, snap.BudgetMonthlyCents
	cfg.AdapterConfig, cfg.RuntimeConfig = orEmpty(snap.AdapterConfig), orEmpty(snap.RuntimeConfig)
	// The built-in marker is the built-in agent service's: a rollback keeps the current one.
	cfg.Metadata = withMarker(orEmpty(snap.Metadata), markerOf(ag.Cfg.Metadata))
	cfg.DesiredSkills = mustJSON(normalizeSkills(snap.DesiredSkills))
	// A manager that has since been terminated, left the company or become a report is dropped.
	cfg.ReportsTo = nil
	if snap.ReportsTo != nil {
		var errs fieldErrs
		if err := a.validateReportsTo(ctx, &errs, ag.ID.CompanyId, ag.ID.Id, snap.ReportsTo); err == nil && len(errs) == 0 {
			cfg.ReportsTo = snap.ReportsTo
		}
	}
	changed := changedKeys(ag.Cfg.snapshot(ag.ID), cfg.snapshot(ag.ID))
	if err := a.saveWithRevision(ctx, ag, &cfg, "rollback", &rev.ID, changed); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.activity(ctx, ag.ID.CompanyId, "agent.config_rolled_back", "agent", ag.ID.Id,
		map[string]any{"revisionId": rev.ID, "changedKeys": changed}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	a.writeAgent(ctx, rw, http.StatusOK, &agentRef{ID: ag.ID, Cfg: &cfg}, false)
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// requireConfigWriter allows actors holding agents:create in the agent's company (and agents
// with the legacy canCreateAgents flag) to change an agent's configuration.
func (a *Agents) requireConfigWriter(ctx context.Context, ag *agentRef) error {
	return a.requireManageAgents(ctx, ag.ID.CompanyId)
}
