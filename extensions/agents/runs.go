package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Run statuses (REFERENCE 2.7).
const (
	runQueued         = "queued"
	runScheduledRetry = "scheduled_retry"
	runRunning        = "running"
	runSucceeded      = "succeeded"
	runFailed         = "failed"
	runCancelled      = "cancelled"
	runTimedOut       = "timed_out"
	runInterrupted    = "interrupted"
)

// runTerminal reports whether a run status is final.
func runTerminal(status string) bool {
	switch status {
	case runSucceeded, runFailed, runCancelled, runTimedOut, runInterrupted:
		return true
	}
	return false
}

// heartbeatRun is one row of heartbeat_runs as the API shows it
// (reference-samples/heartbeat_runs.json).
type heartbeatRun struct {
	ID                    string          `json:"id"`
	CompanyID             string          `json:"companyId"`
	AgentID               string          `json:"agentId"`
	InvocationSource      string          `json:"invocationSource"`
	TriggerDetail         *string         `json:"triggerDetail"`
	Status                string          `json:"status"`
	StartedAt             *time.Time      `json:"startedAt"`
	FinishedAt            *time.Time      `json:"finishedAt"`
	Error                 *string         `json:"error"`
	ErrorCode             *string         `json:"errorCode"`
	WakeupRequestID       *string         `json:"wakeupRequestId"`
	AdapterType           *string         `json:"adapterType"`
	ExitCode              *int            `json:"exitCode"`
	Signal                *string         `json:"signal"`
	ProcessPID            *int            `json:"processPid"`
	ProcessStartedAt      *time.Time      `json:"processStartedAt"`
	UsageJSON             json.RawMessage `json:"usageJson"`
	ResultJSON            json.RawMessage `json:"resultJson"`
	SessionIDBefore       *string         `json:"sessionIdBefore"`
	SessionIDAfter        *string         `json:"sessionIdAfter"`
	LogStore              string          `json:"logStore"`
	LogRef                *string         `json:"logRef"`
	LogBytes              int64           `json:"logBytes"`
	LogSha256             *string         `json:"logSha256"`
	LogCompressed         bool            `json:"logCompressed"`
	StdoutExcerpt         *string         `json:"stdoutExcerpt"`
	StderrExcerpt         *string         `json:"stderrExcerpt"`
	LastOutputAt          *time.Time      `json:"lastOutputAt"`
	LastOutputSeq         int64           `json:"lastOutputSeq"`
	LastOutputStream      *string         `json:"lastOutputStream"`
	LastOutputBytes       int64           `json:"lastOutputBytes"`
	RetryOfRunID          *string         `json:"retryOfRunId"`
	ProcessLossRetryCount int             `json:"processLossRetryCount"`
	ContextSnapshot       map[string]any  `json:"contextSnapshot"`
	CreatedAt             time.Time       `json:"createdAt"`
	UpdatedAt             time.Time       `json:"updatedAt"`

	// A retry (of a process-lost or interrupted run) waits in scheduled_retry until
	// ScheduledRetryAt, then joins the queue.
	ScheduledRetryAt      *time.Time `json:"scheduledRetryAt"`
	ScheduledRetryAttempt int        `json:"scheduledRetryAttempt"`
	ScheduledRetryReason  *string    `json:"scheduledRetryReason"`

	// Fields of the reference shape the engine does not track yet (liveness
	// classification, external runs): always their empty value. processGroupId is the
	// group the adapter reported at spawn, else the process id (adapters start each run in
	// its own process group).
	ProcessGroupID      *int       `json:"processGroupId"`
	ExternalRunID       *string    `json:"externalRunId"`
	LivenessState       *string    `json:"livenessState"`
	LivenessReason      *string    `json:"livenessReason"`
	ContinuationAttempt int        `json:"continuationAttempt"`
	LastUsefulActionAt  *time.Time `json:"lastUsefulActionAt"`
	NextAction          *string    `json:"nextAction"`

	executorID     *string
	executorHost   *string
	executorSeenAt *time.Time
	// claimedAt is when start-runs admitted the run under the caps; a queued run with it
	// set is starting (it counts against the caps until it ends).
	claimedAt *time.Time
	// processGroup, processStartTicks and processBootID name the run's process for good,
	// for a restarted node to kill a survivor (never a recycled pid).
	processGroup      *int
	processStartTicks *int64
	processBootID     *string
}

const runColumns = `id, company_id, agent_id, invocation_source, trigger_detail, status, started_at, finished_at,
	error, error_code, wakeup_request_id, adapter_type, exit_code, signal, process_pid, process_started_at,
	usage_json, result_json, session_id_before, session_id_after, log_store, log_ref, log_bytes, log_sha256,
	stdout_excerpt, stderr_excerpt, last_output_at, last_output_seq, last_output_stream, last_output_bytes,
	retry_of_run_id, process_loss_retry_count, context_snapshot, created_at, updated_at,
	executor_id, executor_host, executor_seen_at, scheduled_retry_at, scheduled_retry_attempt, scheduled_retry_reason,
	claimed_at, process_group_id, process_start_ticks, process_boot_id`

func scanRun(row pgx.Row) (*heartbeatRun, error) {
	r := &heartbeatRun{}
	var usage, result, snapshot []byte
	err := row.Scan(&r.ID, &r.CompanyID, &r.AgentID, &r.InvocationSource, &r.TriggerDetail, &r.Status, &r.StartedAt, &r.FinishedAt,
		&r.Error, &r.ErrorCode, &r.WakeupRequestID, &r.AdapterType, &r.ExitCode, &r.Signal, &r.ProcessPID, &r.ProcessStartedAt,
		&usage, &result, &r.SessionIDBefore, &r.SessionIDAfter, &r.LogStore, &r.LogRef, &r.LogBytes, &r.LogSha256,
		&r.StdoutExcerpt, &r.StderrExcerpt, &r.LastOutputAt, &r.LastOutputSeq, &r.LastOutputStream, &r.LastOutputBytes,
		&r.RetryOfRunID, &r.ProcessLossRetryCount, &snapshot, &r.CreatedAt, &r.UpdatedAt,
		&r.executorID, &r.executorHost, &r.executorSeenAt, &r.ScheduledRetryAt, &r.ScheduledRetryAttempt, &r.ScheduledRetryReason,
		&r.claimedAt, &r.processGroup, &r.processStartTicks, &r.processBootID)
	if err != nil {
		return nil, err
	}
	if len(usage) > 0 {
		r.UsageJSON = usage
	}
	if len(result) > 0 {
		r.ResultJSON = result
	}
	r.ProcessGroupID = r.processGroup
	if r.ProcessGroupID == nil {
		r.ProcessGroupID = r.ProcessPID
	}
	r.ContextSnapshot = map[string]any{}
	if len(snapshot) > 0 {
		_ = json.Unmarshal(snapshot, &r.ContextSnapshot)
	}
	return r, nil
}

// MarshalJSON keeps null JSON columns as null.
func (r *heartbeatRun) MarshalJSON() ([]byte, error) {
	type plain heartbeatRun
	p := (*plain)(r)
	if len(p.UsageJSON) == 0 {
		p.UsageJSON = json.RawMessage("null")
	}
	if len(p.ResultJSON) == 0 {
		p.ResultJSON = json.RawMessage("null")
	}
	return json.Marshal(p)
}

// runGet loads a run; nil when there is none.
func (a *Agents) runGet(ctx context.Context, q querier, id string) (*heartbeatRun, error) {
	if !isUUID(id) {
		return nil, nil
	}
	r, err := scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM heartbeat_runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error loading run %s: %w", id, err)
	}
	return r, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (a *Agents) runsQuery(ctx context.Context, sql string, args ...any) ([]*heartbeatRun, error) {
	rows, err := a.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("error listing runs: %w", err)
	}
	defer rows.Close()
	out := []*heartbeatRun{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("error reading run: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// runForRequest loads the run of the path's {runId} and checks the actor's company access.
func (a *Agents) runForRequest(r *http.Request) (*heartbeatRun, error) {
	run, err := a.runGet(r.Context(), a.pool, r.PathValue("runId"))
	if err != nil {
		return nil, err
	}
	if run == nil {
		return nil, notFound("Heartbeat run not found")
	}
	if err := requireCompanyAccess(r.Context(), run.CompanyID); err != nil {
		return nil, err
	}
	return run, nil
}

func init() {
	addRoutes(
		route{Method: "GET", Path: "/api/companies/{companyId}/heartbeat-runs", Query: runListQuery{}, Response: new([]*heartbeatRun), CompanyFromPath: true,
			Summary: "List heartbeat runs of a company, newest first (filters agentId, status; limit and offset).", Handle: (*Agents).listRunsRoute},
		route{Method: "GET", Path: "/api/companies/{companyId}/live-runs", Response: new([]*heartbeatRun), CompanyFromPath: true,
			Summary: "List queued and running heartbeat runs of a company.", Handle: (*Agents).liveRunsRoute},
		route{Method: "GET", Path: "/api/heartbeat-runs/{runId}", Response: new(heartbeatRun), Summary: "Get a heartbeat run.", Handle: (*Agents).getRunRoute},
		route{Method: "GET", Path: "/api/heartbeat-runs/{runId}/events", Query: runEventsQuery{}, Response: new([]runEventView), Summary: "List the events of a heartbeat run (afterSeq, limit).",
			Handle: (*Agents).runEventsRoute},
		route{Method: "GET", Path: "/api/heartbeat-runs/{runId}/log", Query: runLogQuery{},
			Summary: "Read a run's log as text/plain from ?offset= (bytes). With ?follow=1 on a live run the request " +
				"long-polls up to 25 s for new bytes; X-Log-Offset gives the next offset and X-Run-Live whether to poll again.",
			Handle: (*Agents).runLogRoute},
		route{Method: "POST", Path: "/api/heartbeat-runs/{runId}/cancel", Response: new(cancelRunResult), Summary: "Cancel a queued or running heartbeat run.",
			Handle: (*Agents).cancelRunRoute},
	)
}

func (a *Agents) listRunsRoute(rw http.ResponseWriter, r *http.Request) {
	companyID := r.PathValue("companyId")
	limit, offset, err := page(r, 50, 500)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	q := r.URL.Query()
	sql := `SELECT ` + runColumns + ` FROM heartbeat_runs WHERE company_id = $1`
	args := []any{companyID}
	if v := q.Get("agentId"); v != "" {
		if !isUUID(v) {
			a.writeErr(rw, invalid("agentId", "must be a UUID"))
			return
		}
		args = append(args, v)
		sql += fmt.Sprintf(" AND agent_id = $%d", len(args))
	}
	if v := q.Get("status"); v != "" {
		args = append(args, strings.Split(v, ","))
		sql += fmt.Sprintf(" AND status = ANY($%d)", len(args))
	}
	args = append(args, limit, offset)
	sql += fmt.Sprintf(" ORDER BY created_at DESC, id LIMIT $%d OFFSET $%d", len(args)-1, len(args))
	runs, err := a.runsQuery(r.Context(), sql, args...)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, runs)
}

func (a *Agents) liveRunsRoute(rw http.ResponseWriter, r *http.Request) {
	runs, err := a.runsQuery(r.Context(), `SELECT `+runColumns+` FROM heartbeat_runs
		WHERE company_id = $1 AND status IN ('queued', 'running') ORDER BY created_at DESC, id`, r.PathValue("companyId"))
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, runs)
}

func (a *Agents) getRunRoute(rw http.ResponseWriter, r *http.Request) {
	run, err := a.runForRequest(r)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, run)
}

// runEventView is one heartbeat_run_events row as the API shows it.
type runEventView struct {
	ID        int64           `json:"id"`
	RunID     string          `json:"runId"`
	AgentID   string          `json:"agentId"`
	Seq       int64           `json:"seq"`
	EventType string          `json:"eventType"`
	Stream    *string         `json:"stream"`
	Level     *string         `json:"level"`
	Message   *string         `json:"message"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"createdAt"`
}

func (a *Agents) runEventsRoute(rw http.ResponseWriter, r *http.Request) {
	run, err := a.runForRequest(r)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	limit, _, err := page(r, 500, 5000)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	after := int64(-1)
	if v := r.URL.Query().Get("afterSeq"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil {
			a.writeErr(rw, invalid("afterSeq", "must be an integer"))
			return
		}
	}
	rows, err := a.pool.Query(r.Context(), `SELECT id, run_id, agent_id, seq, event_type, stream, level, message, payload, created_at
		FROM heartbeat_run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq, id LIMIT $3`, run.ID, after, limit)
	if err != nil {
		a.writeErr(rw, fmt.Errorf("error listing events of run %s: %w", run.ID, err))
		return
	}
	defer rows.Close()
	out := []runEventView{}
	for rows.Next() {
		var e runEventView
		var payload []byte
		if err := rows.Scan(&e.ID, &e.RunID, &e.AgentID, &e.Seq, &e.EventType, &e.Stream, &e.Level, &e.Message, &payload, &e.CreatedAt); err != nil {
			a.writeErr(rw, fmt.Errorf("error reading event of run %s: %w", run.ID, err))
			return
		}
		if len(payload) > 0 {
			e.Payload = payload
		} else {
			e.Payload = json.RawMessage("null")
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		a.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// runLogRoute serves the run's log file from ?offset=. As a simple substitute for streaming,
// ?follow=1 on a live run waits up to 25 s for the log to grow past the offset (or the run
// to finish) before answering; clients poll again from X-Log-Offset while X-Run-Live is true.
func (a *Agents) runLogRoute(rw http.ResponseWriter, r *http.Request) {
	run, err := a.runForRequest(r)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	var offset int64
	if v := r.URL.Query().Get("offset"); v != "" {
		if offset, err = strconv.ParseInt(v, 10, 64); err != nil || offset < 0 {
			a.writeErr(rw, invalid("offset", "must be a non-negative integer"))
			return
		}
	}
	follow := r.URL.Query().Get("follow") == "1" || r.URL.Query().Get("follow") == "true"
	path := a.runLogPath(run.ID)
	deadline := time.Now().Add(25 * time.Second)
	for follow && !runTerminal(run.Status) && time.Now().Before(deadline) && a.runLogSize(path, run) <= offset {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if run, err = a.runGet(r.Context(), a.pool, run.ID); err != nil || run == nil {
			a.writeErr(rw, fmt.Errorf("error reloading run: %w", err))
			return
		}
	}
	data, err := a.readRunLog(r.Context(), path, run.ID, offset)
	if err != nil {
		a.writeErr(rw, fmt.Errorf("error reading log of run %s: %w", run.ID, err))
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("X-Log-Offset", strconv.FormatInt(offset+int64(len(data)), 10))
	rw.Header().Set("X-Run-Live", strconv.FormatBool(!runTerminal(run.Status)))
	rw.WriteHeader(http.StatusOK)
	_, _ = rw.Write(data)
}

// runLogSize is the size of the run's log: its file on this node, or the byte count the
// run row keeps when another node executed it.
func (a *Agents) runLogSize(path string, run *heartbeatRun) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return run.LogBytes
}

// readRunLog reads a run's log from offset: from this node's log file when this node
// executed the run, otherwise rebuilt from the run's log events in the database, so every
// node serves every run's log.
func (a *Agents) readRunLog(ctx context.Context, path, runID string, offset int64) ([]byte, error) {
	if _, err := os.Stat(path); err == nil {
		return readLogFrom(path, offset)
	}
	var text string
	if err := a.pool.QueryRow(ctx, `SELECT coalesce(string_agg(message, '' ORDER BY seq), '') FROM heartbeat_run_events
		WHERE run_id = $1 AND event_type = 'log' AND message IS NOT NULL`, runID).Scan(&text); err != nil {
		return nil, fmt.Errorf("error rebuilding log of run %s from its events: %w", runID, err)
	}
	if offset >= int64(len(text)) {
		return []byte{}, nil
	}
	return []byte(text[offset:]), nil
}

func (a *Agents) cancelRunRoute(rw http.ResponseWriter, r *http.Request) {
	run, err := a.runForRequest(r)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	actor := sdk.ActorFrom(r.Context())
	if actor != nil && actor.Type == "agent" && actor.AgentId != run.AgentID {
		a.writeErr(rw, forbidden("Agent can only cancel its own runs"))
		return
	}
	out, err := a.engine.cancelRun(r.Context(), run.ID)
	if err != nil {
		a.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// runListQuery documents the query parameters of the run list.
type runListQuery struct {
	AgentID string `query:"agentId" jsonschema:"format=uuid"`
	Status  string `query:"status" doc:"Comma-separated run statuses"`
	Limit   int    `query:"limit" jsonschema:"minimum=1,maximum=500" doc:"Page size (default 50)"`
	Offset  int    `query:"offset" jsonschema:"minimum=0" doc:"Runs to skip (pagination)"`
}

// runEventsQuery documents the query parameters of a run's events.
type runEventsQuery struct {
	AfterSeq int `query:"afterSeq" jsonschema:"minimum=0" doc:"Events after this sequence number"`
	Limit    int `query:"limit" jsonschema:"minimum=1"`
}

// runLogQuery documents the query parameters of a run's log.
type runLogQuery struct {
	Offset int    `query:"offset" jsonschema:"minimum=0" doc:"Byte offset to read from"`
	Follow string `query:"follow" jsonschema:"enum=1,enum=true" doc:"Long-poll a live run for new bytes"`
}
