package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Job run triggers and statuses.
const (
	JobTriggerSchedule = "schedule"
	JobTriggerManual   = "manual"
	JobTriggerEnqueue  = "enqueue"

	JobRunQueued    = "queued"
	JobRunRunning   = "running"
	JobRunSucceeded = "succeeded"
	JobRunFailed    = "failed"
)

// PluginJob is a declared job with its schedule and last run.
type PluginJob struct {
	// ID is the job key: jobs are identified by their key within a plugin.
	ID          string        `json:"id"`
	PluginID    string        `json:"pluginId"`
	JobKey      string        `json:"jobKey"`
	Description string        `json:"description,omitempty"`
	Schedule    *string       `json:"schedule"`
	Status      string        `json:"status"`
	LastRunAt   *time.Time    `json:"lastRunAt"`
	LastRun     *PluginJobRun `json:"lastRun"`
}

// PluginJobRun is one run of a declared job (one queued job, however many attempts).
type PluginJobRun struct {
	ID         string     `json:"id"`
	JobID      string     `json:"jobId"`
	JobKey     string     `json:"jobKey"`
	PluginKey  string     `json:"pluginKey"`
	QueueJobID *int64     `json:"queueJobId"`
	Trigger    string     `json:"trigger"`
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	DurationMs *int       `json:"durationMs"`
	Error      *string    `json:"error"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// JobRunStartParams records the start of one attempt of a queued job.
type JobRunStartParams struct {
	PluginKey, JobKey, Trigger string
	QueueJobID                 int64
	Attempt                    int
}

// JobRunQueue records a queued run before it starts (a manual trigger).
func (k *Kernel) JobRunQueue(ctx context.Context, pluginKey, jobKey, trigger string, queueJobID int64) error {
	if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.plugin_job_runs (id, extension_key, job_key, queue_job_id, trigger, status)
		VALUES ($1, $2, $3, $4, $5, 'queued') ON CONFLICT (queue_job_id) DO UPDATE SET trigger = EXCLUDED.trigger`, newID(), pluginKey, jobKey, queueJobID, trigger); err != nil {
		return fmt.Errorf("error recording queued run of %s/%s: %w", pluginKey, jobKey, err)
	}
	return nil
}

// JobRunStart records that an attempt of a queued job started.
func (k *Kernel) JobRunStart(ctx context.Context, p *JobRunStartParams) error {
	if p.Trigger == "" {
		p.Trigger = JobTriggerEnqueue
	}
	k.sweepPluginHistory(ctx)
	if _, err := k.Pool.Exec(ctx, `INSERT INTO kernel.plugin_job_runs (id, extension_key, job_key, queue_job_id, trigger, status, attempts, started_at)
		VALUES ($1, $2, $3, $4, $5, 'running', $6, now())
		ON CONFLICT (queue_job_id) DO UPDATE SET status = 'running', attempts = EXCLUDED.attempts, started_at = now(), finished_at = NULL`,
		newID(), p.PluginKey, p.JobKey, p.QueueJobID, p.Trigger, p.Attempt); err != nil {
		return fmt.Errorf("error recording run of %s/%s: %w", p.PluginKey, p.JobKey, err)
	}
	return nil
}

// JobRunFinish records how an attempt of a queued job ended (runErr nil is success).
func (k *Kernel) JobRunFinish(ctx context.Context, queueJobID int64, runErr error, d time.Duration) error {
	status, msg := JobRunSucceeded, (*string)(nil)
	if runErr != nil {
		status = JobRunFailed
		s := runErr.Error()
		msg = &s
	}
	if _, err := k.Pool.Exec(ctx, `UPDATE kernel.plugin_job_runs SET status = $2, error = $3, duration_ms = $4, finished_at = now()
		WHERE queue_job_id = $1`, queueJobID, status, msg, int(d.Milliseconds())); err != nil {
		return fmt.Errorf("error recording end of job run %d: %w", queueJobID, err)
	}
	return nil
}

// JobRunList returns a plugin's most recent runs, of one job when jobKey is set, newest first.
func (k *Kernel) JobRunList(ctx context.Context, pluginKey, jobKey string, limit int) ([]*PluginJobRun, error) {
	rows, err := k.Pool.Query(ctx, `SELECT id::text, job_key, extension_key, queue_job_id, trigger, status, attempts, duration_ms, error, started_at, finished_at, created_at
		FROM kernel.plugin_job_runs WHERE extension_key = $1 AND ($2 = '' OR job_key = $2) ORDER BY created_at DESC, id DESC LIMIT $3`, pluginKey, jobKey, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing job runs of %s: %w", pluginKey, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*PluginJobRun, error) {
		var j PluginJobRun
		err := r.Scan(&j.ID, &j.JobKey, &j.PluginKey, &j.QueueJobID, &j.Trigger, &j.Status, &j.Attempts, &j.DurationMs, &j.Error, &j.StartedAt, &j.FinishedAt, &j.CreatedAt)
		j.JobID = j.JobKey
		return &j, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing job runs of %s: %w", pluginKey, err)
	}
	return out, nil
}

type pluginJobsEndpoint struct{ k *Kernel }

func (e *pluginJobsEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/jobs", Access: AccessInstanceAdmin,
		Summary: "List a plugin's declared jobs with their schedule and last run"}
}

func (e *pluginJobsEndpoint) Execute(ctx context.Context, req *pluginRequest) (*[]*PluginJob, error) {
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	out := make([]*PluginJob, 0, len(p.mf.Jobs))
	for _, j := range p.mf.Jobs {
		pj := &PluginJob{ID: j.Key, PluginID: p.rec.ID, JobKey: j.Key, Description: j.Description, Status: "active"}
		if !p.enabled() {
			pj.Status = "paused"
		}
		switch {
		case j.Cron != "":
			pj.Schedule = &j.Cron
		case j.Every != "":
			s := "every " + j.Every
			pj.Schedule = &s
		}
		runs, err := e.k.JobRunList(ctx, p.rec.PluginKey, j.Key, 1)
		if err != nil {
			return nil, Internal(err)
		}
		if len(runs) > 0 {
			pj.LastRun = runs[0]
			pj.LastRunAt = &runs[0].CreatedAt
			if runs[0].StartedAt != nil {
				pj.LastRunAt = runs[0].StartedAt
			}
		}
		out = append(out, pj)
	}
	return &out, nil
}

type jobRequest struct {
	PluginID string `path:"pluginId"`
	JobID    string `path:"jobId"`
}

type jobRunsRequest struct {
	PluginID string `path:"pluginId"`
	JobID    string `path:"jobId"`
	Limit    *int   `query:"limit"`
}

func limitParam(limit *int, def, max int) (int, error) {
	if limit == nil {
		return def, nil
	}
	if *limit < 1 || *limit > max {
		return 0, ValidationError(ValidationDetail{Path: "limit", Message: fmt.Sprintf("must be between 1 and %d", max)})
	}
	return *limit, nil
}

type pluginJobRunsEndpoint struct{ k *Kernel }

func (e *pluginJobRunsEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "GET /api/plugins/{pluginId}/jobs/{jobId}/runs", Access: AccessInstanceAdmin,
		Summary: "A plugin job's run history, newest first (limit 1-500, default 25)"}
}

func (e *pluginJobRunsEndpoint) Execute(ctx context.Context, req *jobRunsRequest) (*[]*PluginJobRun, error) {
	limit, err := limitParam(req.Limit, 25, 500)
	if err != nil {
		return nil, err
	}
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if p.mf.Job(req.JobID) == nil {
		return nil, NotFound(fmt.Sprintf("Job %q not found", req.JobID))
	}
	runs, err := e.k.JobRunList(ctx, p.rec.PluginKey, req.JobID, limit)
	if err != nil {
		return nil, Internal(err)
	}
	return &runs, nil
}

// JobTriggerResult is a queued manual run.
type JobTriggerResult struct {
	RunID      string `json:"runId"`
	JobID      string `json:"jobId"`
	QueueJobID int64  `json:"queueJobId"`
}

type pluginJobTriggerEndpoint struct{ k *Kernel }

func (e *pluginJobTriggerEndpoint) Meta() *EndpointMeta {
	return &EndpointMeta{Pattern: "POST /api/plugins/{pluginId}/jobs/{jobId}/trigger", Access: AccessInstanceAdmin, Status: 202,
		Summary: "Queue a run of a plugin job now (recorded with trigger manual)"}
}

func (e *pluginJobTriggerEndpoint) Execute(ctx context.Context, req *jobRequest) (*JobTriggerResult, error) {
	p, err := e.k.pluginByID(ctx, req.PluginID)
	if err != nil {
		return nil, err
	}
	if p.mf.Job(req.JobID) == nil {
		return nil, NotFound(fmt.Sprintf("Job %q not found", req.JobID))
	}
	if !p.enabled() {
		return nil, p.notReady()
	}
	rt, err := e.k.runtime()
	if err != nil {
		return nil, err
	}
	qid, err := rt.PluginTriggerJob(ctx, p.rec.PluginKey, req.JobID)
	if err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return nil, apiErr
		}
		return nil, Internal(err)
	}
	if err := e.k.JobRunQueue(ctx, p.rec.PluginKey, req.JobID, JobTriggerManual, qid); err != nil {
		return nil, Internal(err)
	}
	var runID string
	if err := e.k.Pool.QueryRow(ctx, `SELECT id::text FROM kernel.plugin_job_runs WHERE queue_job_id = $1`, qid).Scan(&runID); err != nil {
		return nil, Internal(fmt.Errorf("error reading queued run of %s/%s: %w", p.rec.PluginKey, req.JobID, err))
	}
	actor := ActorFrom(ctx)
	if _, err := e.k.ActivityInsert(ctx, &ActivityInsertParams{ActorType: "user", ActorID: actor.UserID, Action: "plugin.job.triggered",
		EntityType: "plugin", EntityID: p.rec.ID, Details: map[string]any{"pluginKey": p.rec.PluginKey, "jobKey": req.JobID, "runId": runID}}); err != nil {
		return nil, Internal(err)
	}
	return &JobTriggerResult{RunID: runID, JobID: req.JobID, QueueJobID: qid}, nil
}
