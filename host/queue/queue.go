// Package queue is keel's one job queue, River on PostgreSQL: extension jobs (on demand, on
// a cron schedule or an interval), and at-least-once event delivery to subscribed
// extensions. River elects one leader among keel nodes for periodic work and hands each job
// to exactly one node; unique keys drop duplicates.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/robfig/cron/v3"

	"github.com/keelhq/keel/host/metrics"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	extensionv1 "github.com/keelhq/keel/sdk/proto/extension/v1"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// Schema is the PostgreSQL schema holding River's tables.
const Schema = "river"

// Extensions is what the queue needs of the supervisor.
type Extensions interface {
	// Acquire returns a client of a loaded extension (starting a lazy one) and a release
	// function to call when done; an error while it is down or unknown.
	Acquire(ctx context.Context, key string) (extensionv1.ExtensionClient, func(), error)
	// Subscribers returns the manifests of the loaded extensions that take events now:
	// enabled, with their flag on when gated, and subscribed to at least one event.
	Subscribers(ctx context.Context) []*sdk.Manifest
}

// JobArgs is one run of an extension's declared job.
type JobArgs struct {
	Extension string          `json:"extension" river:"unique"`
	Key       string          `json:"key" river:"unique"`
	UniqueKey string          `json:"uniqueKey,omitempty" river:"unique"`
	Args      json.RawMessage `json:"args,omitempty"`
	// Trigger says why the job runs (kernel.JobTriggerSchedule for declared schedules; empty
	// for jobs an extension enqueues), recorded in the run history.
	Trigger string `json:"trigger,omitempty"`
}

// Kind names the River job kind.
func (JobArgs) Kind() string { return "keel_extension_job" }

// RunRecorder records extension job runs (the kernel's plugin job run history).
type RunRecorder interface {
	JobRunStart(ctx context.Context, p *kernel.JobRunStartParams) error
	JobRunFinish(ctx context.Context, queueJobID int64, runErr error, d time.Duration) error
}

// EventArgs is one delivery of an event to one subscriber.
type EventArgs struct {
	Extension  string          `json:"extension" river:"unique"`
	EventID    string          `json:"eventId" river:"unique"`
	Type       string          `json:"type"`
	CompanyID  string          `json:"companyId,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	OccurredAt time.Time       `json:"occurredAt"`
	Source     string          `json:"source"`
}

// Kind names the River job kind.
func (EventArgs) Kind() string { return "keel_event_delivery" }

// Queue wraps the River client.
type Queue struct {
	client *river.Client[pgx.Tx]
	exts   Extensions
	log    hclog.Logger
	pool   *pgxpool.Pool
	m      *metrics.Metrics
	runs   RunRecorder
	// worked is told, after a job or an event delivery, which company it may have changed
	// ("" for any).
	worked func(companyID string)
}

// SetRunRecorder sets where extension job runs are recorded (nil records nothing).
func (q *Queue) SetRunRecorder(r RunRecorder) { q.runs = r }

// Config configures the queue.
type Config struct {
	Pool       *pgxpool.Pool
	Extensions Extensions
	Logger     hclog.Logger
	// MaxWorkers bounds concurrent jobs on this node (default 16).
	MaxWorkers int
	// FetchPoll is how often workers poll when LISTEN/NOTIFY is quiet (default River's).
	FetchPoll time.Duration
	// Metrics records job latency (nil records nothing).
	Metrics *metrics.Metrics
	// Worked is called after each job (with "") and each event delivery (with the event's
	// company) that reached an extension, which may have written data: the host forgets
	// the cached reads it may have changed. Nil calls nothing.
	Worked func(companyID string)
}

// Migrate applies River's migrations in its own schema; safe to re-run and to race.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+Schema); err != nil {
		return fmt.Errorf("error creating schema %s: %w", Schema, err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error migrating job queue: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(727001)`); err != nil {
		return fmt.Errorf("error locking job queue migrations: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(727001)`) //nolint:errcheck
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: Schema})
	if err != nil {
		return fmt.Errorf("error preparing job queue migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("error migrating job queue: %w", err)
	}
	return nil
}

// New returns a queue whose workers call into the extensions. Call Start to work jobs.
func New(cfg Config) (*Queue, error) {
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	q := &Queue{exts: cfg.Extensions, log: cfg.Logger, pool: cfg.Pool, m: cfg.Metrics, worked: cfg.Worked}
	workers := river.NewWorkers()
	river.AddWorker(workers, &extensionJobWorker{q: q})
	river.AddWorker(workers, river.WorkFunc(q.workEvent))
	rc := &river.Config{
		Schema:      Schema,
		Queues:      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
		Workers:     workers,
		MaxAttempts: 10,
		JobTimeout:  5 * time.Minute,
		Logger:      nil,
		// A job still running after this long on a node that stopped heartbeating is rescued
		// and retried; extension jobs are idempotent and long ones guard with their own state.
		RescueStuckJobsAfter: 6 * time.Hour,
	}
	// Work is woken by LISTEN/NOTIFY; the cooldown bounds how often a busy queue re-fetches
	// and so the latency from insert to pickup (River's default is 100ms).
	rc.FetchCooldown = 20 * time.Millisecond
	if cfg.FetchPoll > 0 {
		rc.FetchPollInterval = cfg.FetchPoll
		rc.FetchCooldown = min(cfg.FetchPoll, rc.FetchCooldown)
	}
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), rc)
	if err != nil {
		return nil, fmt.Errorf("error creating job queue client: %w", err)
	}
	q.client = client
	return q, nil
}

// Start begins working jobs on this node.
func (q *Queue) Start(ctx context.Context) error {
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("error starting job queue: %w", err)
	}
	return nil
}

// Stop waits for running jobs to finish (bounded by ctx).
func (q *Queue) Stop(ctx context.Context) error { return q.client.Stop(ctx) }

// StopWithin waits up to grace for running jobs to finish. Jobs still running then are
// interrupted: interrupt runs first (the host stops the extensions, which record their
// long work, such as heartbeat runs, as interrupted), then the jobs' contexts are cancelled
// and waited for until ctx ends. It reports whether the jobs had to be interrupted.
func (q *Queue) StopWithin(ctx context.Context, grace time.Duration, interrupt func()) (bool, error) {
	graceCtx, cancel := context.WithTimeout(ctx, grace)
	err := q.client.Stop(graceCtx)
	cancel()
	if err == nil || ctx.Err() != nil {
		return false, err
	}
	if interrupt != nil {
		interrupt()
	}
	return true, q.client.StopAndCancel(ctx)
}

// Client exposes the River client for kernel-level jobs.
func (q *Queue) Client() *river.Client[pgx.Tx] { return q.client }

// Schedule registers the declared cron and interval jobs of a manifest as River periodic
// jobs; only the elected leader node inserts them, so each tick runs once per cluster.
func (q *Queue) Schedule(m *sdk.Manifest) error {
	for _, j := range m.Jobs {
		var sched river.PeriodicSchedule
		switch {
		case j.Cron != "":
			s, err := cron.ParseStandard(j.Cron)
			if err != nil {
				return fmt.Errorf("job %s of %s: invalid cron %q: %w", j.Key, m.Key, j.Cron, err)
			}
			sched = s
		case j.Every != "":
			d, err := time.ParseDuration(j.Every)
			if err != nil || d < time.Second {
				return fmt.Errorf("job %s of %s: invalid interval %q (use a duration of at least 1s)", j.Key, m.Key, j.Every)
			}
			sched = river.PeriodicInterval(d)
		default:
			continue
		}
		args := JobArgs{Extension: m.Key, Key: j.Key, Trigger: kernel.JobTriggerSchedule}
		q.client.PeriodicJobs().Add(river.NewPeriodicJob(sched, func() (river.JobArgs, *river.InsertOpts) {
			return args, nil
		}, &river.PeriodicJobOpts{ID: "ext:" + m.Key + ":" + j.Key}))
	}
	return nil
}

// Enqueue implements hostsvc.Enqueuer.
func (q *Queue) Enqueue(ctx context.Context, extension string, req *hostv1.EnqueueRequest) (*hostv1.EnqueueResponse, error) {
	args := JobArgs{Extension: extension, Key: req.JobKey, UniqueKey: req.UniqueKey, Args: req.ArgsJson}
	if len(args.Args) > 0 && !json.Valid(args.Args) {
		return nil, errors.New("args_json is not valid JSON")
	}
	opts := &river.InsertOpts{}
	if req.UniqueKey != "" {
		// Unique while queued or running: a finished job does not block the next one.
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled,
		}}
	}
	if req.RunAt != "" {
		t, err := time.Parse(time.RFC3339, req.RunAt)
		if err != nil {
			return nil, fmt.Errorf("invalid run_at %q: %w", req.RunAt, err)
		}
		opts.ScheduledAt = t
	}
	if req.MaxAttempts > 0 {
		opts.MaxAttempts = int(req.MaxAttempts)
	}
	res, err := q.client.Insert(ctx, args, opts)
	if err != nil {
		return nil, fmt.Errorf("error enqueueing job %s of %s: %w", req.JobKey, extension, err)
	}
	return &hostv1.EnqueueResponse{JobId: fmt.Sprint(res.Job.ID), Duplicate: res.UniqueSkippedAsDuplicate}, nil
}

// Subscribed reports whether a subscription pattern ("*", "issue.*", "issue.created") matches.
func Subscribed(patterns []string, eventType string) bool {
	for _, p := range patterns {
		switch {
		case p == "*" || p == eventType:
			return true
		case strings.HasSuffix(p, ".*") && strings.HasPrefix(eventType, strings.TrimSuffix(p, "*")):
			return true
		}
	}
	return false
}

// deliveries are the jobs that deliver ev to its subscribers. A disabled extension, or one
// whose flag is off, gets none: like its routes, it takes nothing while it is off, and a
// delivery it could not take would only be retried until it gave up.
func (q *Queue) deliveries(ctx context.Context, ev *kernel.Event) []river.InsertManyParams {
	var params []river.InsertManyParams
	for _, m := range q.exts.Subscribers(ctx) {
		if m.Key == ev.Source || !(Subscribed(m.Events, ev.Type) || Subscribed(m.Events, "activity.logged")) {
			continue
		}
		params = append(params, river.InsertManyParams{Args: EventArgs{
			Extension: m.Key, EventID: ev.ID, Type: ev.Type, CompanyID: ev.CompanyID, Payload: ev.Payload,
			OccurredAt: ev.OccurredAt, Source: ev.Source,
		}, InsertOpts: &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}})
	}
	return params
}

// HasSubscribers implements kernel.EventSubscriptions: whether deliveries returns any job
// for an event of this type from this source.
func (q *Queue) HasSubscribers(ctx context.Context, source, eventType string) bool {
	for _, m := range q.exts.Subscribers(ctx) {
		if m.Key != source && (Subscribed(m.Events, eventType) || Subscribed(m.Events, "activity.logged")) {
			return true
		}
	}
	return false
}

// PublishEventTx implements kernel.EventPublisherTx: deliveries commit with the entry.
func (q *Queue) PublishEventTx(ctx context.Context, tx pgx.Tx, ev *kernel.Event) error {
	params := q.deliveries(ctx, ev)
	if len(params) == 0 {
		return nil
	}
	if _, err := q.client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("error enqueueing deliveries of %s: %w", ev.Type, err)
	}
	return nil
}

// PublishEvent implements kernel.EventPublisher.
func (q *Queue) PublishEvent(ctx context.Context, ev *kernel.Event) error {
	params := q.deliveries(ctx, ev)
	if len(params) == 0 {
		return nil
	}
	if _, err := q.client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("error enqueueing deliveries of %s: %w", ev.Type, err)
	}
	return nil
}

// Publish implements hostsvc.Publisher for events an extension publishes directly.
func (q *Queue) Publish(ctx context.Context, extension string, req *hostv1.PublishRequest) (string, error) {
	if len(req.PayloadJson) > 0 && !json.Valid(req.PayloadJson) {
		return "", errors.New("payload_json is not valid JSON")
	}
	id := fmt.Sprintf("%s-%d", extension, time.Now().UnixNano())
	ev := &kernel.Event{ID: id, Type: req.Type, CompanyID: req.CompanyId, Payload: req.PayloadJson, OccurredAt: time.Now().UTC(), Source: extension}
	return id, q.PublishEvent(ctx, ev)
}

// extensionJobWorker runs extension jobs without a queue-imposed timeout: an extension
// job may drive long work (an agent run) and enforces its own limits.
type extensionJobWorker struct {
	river.WorkerDefaults[JobArgs]
	q *Queue
}

// Timeout disables River's per-job timeout for extension jobs.
func (w *extensionJobWorker) Timeout(*river.Job[JobArgs]) time.Duration { return -1 }

// Work runs the job in its extension.
func (w *extensionJobWorker) Work(ctx context.Context, job *river.Job[JobArgs]) error {
	return w.q.workJob(ctx, job)
}

// Depth counts the jobs not yet finished by kind and state: extension jobs by
// "extension/job key", event deliveries by "event:extension". It implements
// metrics.QueueDepth with one query per scrape.
func (q *Queue) Depth(ctx context.Context) (map[[2]string]int64, error) {
	rows, err := q.pool.Query(ctx, `SELECT CASE kind
			WHEN 'keel_extension_job' THEN coalesce(args->>'extension', '') || '/' || coalesce(args->>'key', '')
			WHEN 'keel_event_delivery' THEN 'event:' || coalesce(args->>'extension', '')
			ELSE kind END, state::text, count(*)
		FROM `+Schema+`.river_job WHERE state IN ('available', 'scheduled', 'retryable', 'running') GROUP BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("error counting queued jobs: %w", err)
	}
	defer rows.Close()
	out := map[[2]string]int64{}
	for rows.Next() {
		var kind, state string
		var n int64
		if err := rows.Scan(&kind, &state, &n); err != nil {
			return nil, fmt.Errorf("error counting queued jobs: %w", err)
		}
		out[[2]string{kind, state}] = n
	}
	return out, rows.Err()
}

// observe records a worked job's wait (from due to pick-up) and duration, and the hop
// into the extension (hop is "job" or "event").
func (q *Queue) observe(kind, extension, hop string, job *rivertype.JobRow, start time.Time, err error) {
	if q.m == nil {
		return
	}
	var wait time.Duration
	if job.AttemptedAt != nil {
		wait = job.AttemptedAt.Sub(job.ScheduledAt)
	}
	d := time.Since(start)
	q.m.ObserveJob(kind, wait, d, err)
	q.m.ObserveHop(extension, hop, d, err)
}

func (q *Queue) workJob(ctx context.Context, job *river.Job[JobArgs]) (err error) {
	start := time.Now()
	q.recordStart(ctx, job)
	defer func() {
		q.observe(job.Args.Extension+"/"+job.Args.Key, job.Args.Extension, "job", job.JobRow, start, err)
		q.recordFinish(ctx, job, err, time.Since(start))
	}()
	c, release, err := q.exts.Acquire(ctx, job.Args.Extension)
	if err != nil {
		return fmt.Errorf("job %s of %s: %w", job.Args.Key, job.Args.Extension, err)
	}
	defer release()
	if q.worked != nil {
		defer q.worked("")
	}
	res, err := c.RunJob(ctx, &extensionv1.RunJobRequest{JobKey: job.Args.Key, ArgsJson: job.Args.Args, Attempt: int32(job.Attempt), JobId: fmt.Sprint(job.ID)})
	if err != nil {
		return fmt.Errorf("job %s of %s: %w", job.Args.Key, job.Args.Extension, err)
	}
	if res.Error != nil {
		return fmt.Errorf("job %s of %s failed: %s", job.Args.Key, job.Args.Extension, res.Error.Message)
	}
	return nil
}

func (q *Queue) workEvent(ctx context.Context, job *river.Job[EventArgs]) (err error) {
	a := job.Args
	start := time.Now()
	defer func() { q.observe("event:"+a.Extension, a.Extension, "event", job.JobRow, start, err) }()
	c, release, err := q.exts.Acquire(ctx, a.Extension)
	if err != nil {
		return fmt.Errorf("delivering %s to %s: %w", a.Type, a.Extension, err)
	}
	defer release()
	if q.worked != nil {
		defer q.worked(a.CompanyID)
	}
	res, err := c.OnEvent(ctx, &extensionv1.Event{Id: a.EventID, Type: a.Type, CompanyId: a.CompanyID, PayloadJson: a.Payload,
		OccurredAt: a.OccurredAt.UTC().Format(time.RFC3339Nano), Source: a.Source})
	if err != nil {
		return fmt.Errorf("delivering %s to %s: %w", a.Type, a.Extension, err)
	}
	if res.Error != nil {
		return fmt.Errorf("delivering %s to %s failed: %s", a.Type, a.Extension, res.Error.Message)
	}
	return nil
}

// recordStart records an attempt's start in the run history; a failure to record is logged,
// never a reason to skip the job.
func (q *Queue) recordStart(ctx context.Context, job *river.Job[JobArgs]) {
	if q.runs == nil {
		return
	}
	if err := q.runs.JobRunStart(context.WithoutCancel(ctx), &kernel.JobRunStartParams{PluginKey: job.Args.Extension, JobKey: job.Args.Key,
		Trigger: job.Args.Trigger, QueueJobID: job.ID, Attempt: job.Attempt}); err != nil {
		q.log.Warn("job run not recorded", "extension", job.Args.Extension, "job", job.Args.Key, "error", err)
	}
}

func (q *Queue) recordFinish(ctx context.Context, job *river.Job[JobArgs], runErr error, d time.Duration) {
	if q.runs == nil {
		return
	}
	if err := q.runs.JobRunFinish(context.WithoutCancel(ctx), job.ID, runErr, d); err != nil {
		q.log.Warn("job run end not recorded", "extension", job.Args.Extension, "job", job.Args.Key, "error", err)
	}
}

var (
	_ rivertype.JobArgs         = JobArgs{}
	_ kernel.EventPublisherTx   = (*Queue)(nil)
	_ kernel.EventSubscriptions = (*Queue)(nil)
)

// Unschedule removes the periodic jobs a manifest declared (an extension uninstalled, or
// replaced by a version whose jobs are scheduled anew).
func (q *Queue) Unschedule(m *sdk.Manifest) {
	for _, j := range m.Jobs {
		q.client.PeriodicJobs().RemoveByID("ext:" + m.Key + ":" + j.Key)
	}
}
