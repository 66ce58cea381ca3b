package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
