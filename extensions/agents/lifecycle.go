package agents

import (
	"context"
	"net/http"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: "POST", Path: "/api/agents/{agentId}/pause", Response: new(agentRecord), Access: sdk.AccessBoard,
			Summary: "Pause an agent (status paused, pauseReason manual)", Handle: lifecycleHandler(pauseAgent)},
		route{Method: "POST", Path: "/api/agents/{agentId}/resume", Response: new(agentRecord), Access: sdk.AccessBoard,
			Summary: "Resume a paused agent (status idle)", Handle: lifecycleHandler(resumeAgent)},
		route{Method: "POST", Path: "/api/agents/{agentId}/approve", Response: new(agentRecord), Access: sdk.AccessBoard,
			Summary: "Approve a pending agent (pending_approval → idle)", Handle: lifecycleHandler(approveAgent)},
		route{Method: "POST", Path: "/api/agents/{agentId}/terminate", Response: new(agentRecord), Access: sdk.AccessBoard,
			Summary: "Terminate an agent; the kernel revokes its API keys", Handle: lifecycleHandler(terminateAgent)},
		route{Method: "POST", Path: "/api/agents/{agentId}/clear-error", Response: new(agentRecord), Access: sdk.AccessBoard,
			Summary: "Clear an agent's error (status error → idle)", Handle: lifecycleHandler(clearAgentError)},
		route{Method: "DELETE", Path: "/api/agents/{agentId}", Response: new(map[string]any), Access: sdk.AccessBoard,
			Summary: "Delete an agent: terminate its identity and drop its configuration", Handle: handleAgentDelete},
	)
}

// lifecycleStep moves an agent and returns the activity action and details to record.
type lifecycleStep func(a *Agents, ctx context.Context, ag *agentRef) (action string, details map[string]any, err error)

func lifecycleHandler(step lifecycleStep) func(a *Agents, rw http.ResponseWriter, r *http.Request) {
	return func(a *Agents, rw http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ag, err := a.loadAgent(ctx, r.PathValue("agentId"))
		if err != nil {
			a.writeErr(rw, err)
			return
		}
		if err := a.requireManageAgents(ctx, ag.ID.CompanyId); err != nil {
			a.writeErr(rw, err)
			return
		}
		action, details, err := step(a, ctx, ag)
		if err != nil {
			a.writeErr(rw, err)
			return
		}
		if action != "" {
			if err := a.activity(ctx, ag.ID.CompanyId, action, "agent", ag.ID.Id, details); err != nil {
				a.log.Warn("error logging activity", "error", err)
			}
		}
		a.writeAgent(ctx, rw, http.StatusOK, ag, false)
	}
}

// moveStatus sets the kernel status and saves the configuration changes made by the caller.
func (a *Agents) moveStatus(ctx context.Context, ag *agentRef, st string) error {
	if err := a.saveConfig(ctx, a.db, ag.Cfg); err != nil {
		return err
	}
	id, err := a.setStatus(ctx, ag.ID.Id, st)
	if err != nil {
		return err
	}
	ag.ID = id
	return nil
}

func pauseAgent(a *Agents, ctx context.Context, ag *agentRef) (string, map[string]any, error) {
	switch ag.ID.Status {
	case statusTerminated:
		return "", nil, conflict("Terminated agents cannot be paused")
	case statusPendingApproval:
		return "", nil, conflict("Pending approval agents cannot be paused")
	}
	reason, now := "manual", timeNow()
	ag.Cfg.PauseReason, ag.Cfg.PausedAt = &reason, &now
	if err := a.moveStatus(ctx, ag, statusPaused); err != nil {
		return "", nil, err
	}
	return "agent.paused", map[string]any{"pauseReason": reason, "cancelledRuns": a.cancelLiveRuns(ctx, ag.ID.Id)}, nil
}

func resumeAgent(a *Agents, ctx context.Context, ag *agentRef) (string, map[string]any, error) {
	switch ag.ID.Status {
	case statusTerminated:
		return "", nil, conflict("Terminated agents cannot be resumed")
	case statusPendingApproval:
		return "", nil, conflict("Pending approval agents cannot be resumed; approve them first")
	}
	ag.Cfg.PauseReason, ag.Cfg.PausedAt = nil, nil
	if err := a.moveStatus(ctx, ag, statusIdle); err != nil {
		return "", nil, err
	}
	return "agent.resumed", nil, nil
}

func approveAgent(a *Agents, ctx context.Context, ag *agentRef) (string, map[string]any, error) {
	if ag.ID.Status != statusPendingApproval {
		return "", nil, conflict("Agent is not pending approval")
	}
	if err := a.moveStatus(ctx, ag, statusIdle); err != nil {
		return "", nil, err
	}
	return "agent.approved", nil, nil
}

func terminateAgent(a *Agents, ctx context.Context, ag *agentRef) (string, map[string]any, error) {
	if ag.ID.Status == statusTerminated {
		return "", nil, nil
	}
	if err := a.moveStatus(ctx, ag, statusTerminated); err != nil {
		return "", nil, err
	}
	return "agent.terminated", map[string]any{"cancelledRuns": a.cancelLiveRuns(ctx, ag.ID.Id)}, nil
}

func clearAgentError(a *Agents, ctx context.Context, ag *agentRef) (string, map[string]any, error) {
	if ag.ID.Status == statusTerminated {
		return "", nil, conflict("Terminated agents cannot be changed")
	}
	ag.Cfg.ErrorReason = nil
	st := ag.ID.Status
	if st == statusError {
		st = statusIdle
	}
	if err := a.moveStatus(ctx, ag, st); err != nil {
		return "", nil, err
	}
	return "agent.error_cleared", nil, nil
}

// handleAgentDelete serves DELETE /api/agents/{agentId}. The kernel keeps identities, so the
// identity is terminated (revoking its keys) and the configuration and revisions dropped.
func handleAgentDelete(a *Agents, rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := a.loadAgent(ctx, r.PathValue("agentId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.requireManageAgents(ctx, ag.ID.CompanyId); err != nil {
		a.writeErr(rw, err)
		return
	}
	if _, err := a.setStatus(ctx, ag.ID.Id, statusTerminated); err != nil {
		a.writeErr(rw, err)
		return
	}
	if _, err := a.db.NewDelete().Model((*configRevision)(nil)).Where("agent_id = ?", ag.ID.Id).Exec(ctx); err != nil {
		a.writeErr(rw, err)
		return
	}
	if _, err := a.db.NewDelete().Model((*configRow)(nil)).Where("agent_id = ?", ag.ID.Id).Exec(ctx); err != nil {
		a.writeErr(rw, err)
		return
	}
	if err := a.activity(ctx, ag.ID.CompanyId, "agent.deleted", "agent", ag.ID.Id, map[string]any{"name": ag.ID.Name}); err != nil {
		a.log.Warn("error logging activity", "error", err)
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]any{"ok": true})
}

// cancelLiveRuns cancels the agent's queued and running runs after a pause or termination
// and returns how many it cancelled; a failure is logged, since the status change stands.
func (a *Agents) cancelLiveRuns(ctx context.Context, agentID string) int {
	if a.engine == nil {
		return 0
	}
	n, err := a.engine.cancelAgentRuns(ctx, agentID)
	if err != nil {
		a.log.Warn("error cancelling runs of a stopped agent", "agent", agentID, "error", err)
	}
	return n
}
