package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// taskKeyOf returns the key a run's session is kept under: the wake context's taskKey,
// taskId or issueId, "" for runs without a task.
func taskKeyOf(c map[string]any) string {
	for _, k := range []string{"taskKey", "taskId", "issueId"} {
		if v, ok := c[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

// taskSession returns the runtime a run starts from: the task's saved session when the
// agent's last run of the task used the same adapter type and the wake does not ask for a
// fresh session, else an empty one naming the task.
func (a *Agents) taskSession(ctx context.Context, run *heartbeatRun, adapterType string) (*adapter.Runtime, error) {
	key := taskKeyOf(run.ContextSnapshot)
	rt := &adapter.Runtime{TaskKey: key}
	if fresh, _ := run.ContextSnapshot["forceFreshSession"].(bool); fresh {
		return rt, nil
	}
	var typ string
	var sid *string
	var params []byte
	err := a.pool.QueryRow(ctx, `SELECT adapter_type, session_id, session_params FROM agent_task_sessions
		WHERE agent_id = $1 AND task_key = $2`, run.AgentID, key).Scan(&typ, &sid, &params)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return rt, nil
	case err != nil:
		return nil, fmt.Errorf("error reading the task session of agent %s: %w", run.AgentID, err)
	case typ != adapterType:
		return rt, nil
	}
	if sid != nil {
		rt.SessionID = *sid
	}
	if len(params) > 0 {
		rt.SessionParams = json.RawMessage(params)
	}
	return rt, nil
}

// saveTaskSession keeps the session a run's adapter returned under the run's task key, or
// forgets the task's session when the adapter asked to clear it.
func (a *Agents) saveTaskSession(ctx context.Context, run *heartbeatRun, out *runOutcome) {
	if out.Adapter == "" {
		return
	}
	key := taskKeyOf(run.ContextSnapshot)
	var err error
	switch {
	case out.ClearSession:
		_, err = a.pool.Exec(ctx, `DELETE FROM agent_task_sessions WHERE agent_id = $1 AND task_key = $2`, run.AgentID, key)
	case out.SessionID != "" || len(out.SessionParams) > 0:
		var params []byte
		if len(out.SessionParams) > 0 && json.Valid(out.SessionParams) {
			params = out.SessionParams
		}
		_, err = a.pool.Exec(ctx, `INSERT INTO agent_task_sessions (agent_id, company_id, task_key, adapter_type, session_id,
			session_params, session_display_id, last_run_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (agent_id, task_key) DO UPDATE SET adapter_type = EXCLUDED.adapter_type, session_id = EXCLUDED.session_id,
			session_params = EXCLUDED.session_params, session_display_id = EXCLUDED.session_display_id,
			last_run_id = EXCLUDED.last_run_id, updated_at = now()`,
			run.AgentID, run.CompanyID, key, out.Adapter, nullable(out.SessionID), params, nullable(out.SessionDisplayID), run.ID)
	}
	if err != nil {
		a.log.Warn("error saving the task session", "run", run.ID, "task", key, "error", err)
	}
}

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/agents/{agentId}/task-sessions", Response: new([]*taskSessionView),
			Summary: "List the sessions an agent's adapter keeps per task (the session its next run of the task resumes)",
			Handle:  handleTaskSessionList},
		route{Method: "POST", Path: "/api/agents/{agentId}/runtime-state/reset-session", Body: new(resetSessionBody),
			Response: new(resetSessionResult),
			Summary:  "Forget an agent's saved session of one task (taskKey) or of every task, so the next run starts fresh",
			Handle:   handleResetSession},
	)
}

// taskSessionView is one saved task session.
type taskSessionView struct {
	TaskKey          string          `json:"taskKey"`
	AdapterType      string          `json:"adapterType"`
	SessionID        *string         `json:"sessionId"`
	SessionDisplayID *string         `json:"sessionDisplayId"`
	SessionParams    json.RawMessage `json:"sessionParams"`
	LastRunID        *string         `json:"lastRunId"`
	UpdatedAt        time.Time       `json:"updatedAt"`
}

// handleTaskSessionList serves GET /api/agents/{agentId}/task-sessions.
func handleTaskSessionList(a *Agents, rw http.ResponseWriter, r *http.Request) {
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
	rows, err := a.pool.Query(ctx, `SELECT task_key, adapter_type, session_id, session_display_id, session_params, last_run_id::text,
		updated_at FROM agent_task_sessions WHERE agent_id = $1 ORDER BY updated_at DESC, task_key`, ag.ID.Id)
	if err != nil {
		a.writeErr(rw, fmt.Errorf("error listing task sessions of agent %s: %w", ag.ID.Id, err))
		return
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*taskSessionView, error) {
		v := &taskSessionView{}
		var params []byte
		err := row.Scan(&v.TaskKey, &v.AdapterType, &v.SessionID, &v.SessionDisplayID, &params, &v.LastRunID, &v.UpdatedAt)
		if len(params) > 0 {
			v.SessionParams = params
		}
		return v, err
	})
	if err != nil {
		a.writeErr(rw, fmt.Errorf("error listing task sessions of agent %s: %w", ag.ID.Id, err))
		return
	}
	if list == nil {
		list = []*taskSessionView{}
	}
	sdk.WriteJSON(rw, http.StatusOK, list)
}

// resetSessionBody names the task whose session to forget; without one every task's.
type resetSessionBody struct {
	TaskKey *string `json:"taskKey,omitempty"`
}

// resetSessionResult says how many saved sessions were forgotten.
type resetSessionResult struct {
	Cleared int64 `json:"cleared"`
}

// handleResetSession serves POST /api/agents/{agentId}/runtime-state/reset-session.
func handleResetSession(a *Agents, rw http.ResponseWriter, r *http.Request) {
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
	var body resetSessionBody
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			a.writeErr(rw, invalid("body", "must be a JSON object with an optional taskKey"))
			return
		}
	}
	q, args := `DELETE FROM agent_task_sessions WHERE agent_id = $1`, []any{ag.ID.Id}
	if body.TaskKey != nil {
		q, args = q+` AND task_key = $2`, append(args, *body.TaskKey)
	}
	tag, err := a.pool.Exec(ctx, q, args...)
	if err != nil {
		a.writeErr(rw, fmt.Errorf("error resetting sessions of agent %s: %w", ag.ID.Id, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, &resetSessionResult{Cleared: tag.RowsAffected()})
}
