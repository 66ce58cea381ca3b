package environments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Lease statuses.
const (
	leaseActive   = "active"
	leaseReleased = "released"
	leaseExpired  = "expired"
	leaseFailed   = "failed"
)

// Lease TTL bounds of the acquire method (seconds).
const (
	leaseTTLDefault = 3600
	leaseTTLMax     = 7 * 24 * 3600
)

// Lease is a hold on an environment.
type Lease struct {
	ID            string `json:"id"`
	CompanyID     string `json:"companyId"`
	EnvironmentID string `json:"environmentId"`
	Driver        string `json:"driver"`
	// Purpose says what holds the lease (login_session, run, …).
	Purpose    string  `json:"purpose"`
	HolderType *string `json:"holderType"`
	HolderID   *string `json:"holderId"`
	// Status is active, released, expired or failed.
	Status          string          `json:"status"`
	ProviderLeaseID *string         `json:"providerLeaseId"`
	Metadata        json.RawMessage `json:"metadata"`
	WorkspacePath   *string         `json:"workspacePath"`
	FailureReason   *string         `json:"failureReason"`
	ExpiresAt       time.Time       `json:"expiresAt"`
	ReleasedAt      *time.Time      `json:"releasedAt"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
}

type leaseListQuery struct {
	Status string `query:"status" doc:"active, released, expired or failed" jsonschema:"enum=active,enum=released,enum=expired,enum=failed"`
}

const leaseColumns = `id, company_id, environment_id, driver, purpose, holder_type, holder_id, status, provider_lease_id, metadata,
	workspace_path, failure_reason, expires_at, released_at, created_at, updated_at`

func scanLease(row pgx.Row) (*Lease, error) {
	var l Lease
	var meta []byte
	if err := row.Scan(&l.ID, &l.CompanyID, &l.EnvironmentID, &l.Driver, &l.Purpose, &l.HolderType, &l.HolderID, &l.Status,
		&l.ProviderLeaseID, &meta, &l.WorkspacePath, &l.FailureReason, &l.ExpiresAt, &l.ReleasedAt, &l.CreatedAt, &l.UpdatedAt); err != nil {
		return nil, err
	}
	if meta != nil {
		l.Metadata = meta
	}
	return &l, nil
}

func (x *Environments) getLease(ctx context.Context, id string) (*Lease, error) {
	if !sdk.IsUUID(id) {
		return nil, sdk.NotFound(msgLeaseNotFound)
	}
	l, err := scanLease(x.pool.QueryRow(ctx, `SELECT `+leaseColumns+` FROM environment_leases WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sdk.NotFound(msgLeaseNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error loading lease %s: %w", id, err)
	}
	return l, nil
}

func (x *Environments) handleLeases(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	e, err := x.envForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	status := r.URL.Query().Get("status")
	switch status {
	case "", leaseActive, leaseReleased, leaseExpired, leaseFailed:
	default:
		x.writeErr(rw, sdk.Invalid("status", "must be active, released, expired or failed"))
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT `+leaseColumns+` FROM environment_leases WHERE environment_id = $1
		AND ($2 = '' OR status = $2) ORDER BY created_at DESC, id DESC`, e.ID, status)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing leases: %w", err))
		return
	}
	out := []*Lease{}
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			rows.Close()
			x.writeErr(rw, fmt.Errorf("error reading leases: %w", err))
			return
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error listing leases: %w", err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

func (x *Environments) handleLease(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	l, err := x.getLease(ctx, r.PathValue("leaseId"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if err := sdk.RequireCompanyAccess(ctx, l.CompanyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, l)
}

// acquireParams asks for a lease.
type acquireParams struct {
	env        *Environment
	purpose    string
	holderType string
	holderID   string
	expiresAt  time.Time
	// workspaceKey, when set, realizes a workspace of that key in the lease.
	workspaceKey *string
}

// ref returns the driver reference of a lease.
func (l *Lease) ref(env *Environment) *sdk.EnvLeaseRef {
	r := &sdk.EnvLeaseRef{EnvironmentRef: sdk.EnvironmentRef{Driver: env.Driver, EnvironmentID: env.ID, CompanyID: env.CompanyID,
		Config: env.Config}, LeaseID: l.ID, Metadata: l.Metadata}
	if l.ProviderLeaseID != nil {
		r.ProviderLeaseID = *l.ProviderLeaseID
	}
	return r
}

// acquire records a lease, then asks the driver for it: a refusal leaves the lease failed
// and is returned.
func (x *Environments) acquire(ctx context.Context, p *acquireParams) (*Lease, error) {
	if p.env.Status != "active" {
		return nil, sdk.Conflict(msgNotActive)
	}
	id, now := newID(), nowUTC()
	nullable := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	if _, err := x.pool.Exec(ctx, `INSERT INTO environment_leases (id, company_id, environment_id, driver, purpose, holder_type, holder_id,
		expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`, id, p.env.CompanyID, p.env.ID, p.env.Driver,
		p.purpose, nullable(p.holderType), nullable(p.holderID), p.expiresAt.UTC(), now); err != nil {
		return nil, fmt.Errorf("error recording lease: %w", err)
	}
	var got sdk.EnvLease
	err := x.callDriver(ctx, p.env.CompanyID, p.env.Driver, sdk.EnvAcquireLeaseMethod, &sdk.EnvLeaseRequest{
		EnvironmentRef: sdk.EnvironmentRef{Driver: p.env.Driver, EnvironmentID: p.env.ID, CompanyID: p.env.CompanyID, Config: p.env.Config},
		LeaseID:        id, Purpose: p.purpose, ExpiresAt: p.expiresAt.UTC()}, &got)
	var workspace *string
	if err == nil && p.workspaceKey != nil {
		var ws sdk.EnvWorkspace
		l := &Lease{ID: id, ProviderLeaseID: &got.ProviderLeaseID, Metadata: got.Metadata}
		err = x.callDriver(ctx, p.env.CompanyID, p.env.Driver, sdk.EnvRealizeWorkspaceMethod,
			&sdk.EnvWorkspaceRequest{EnvLeaseRef: *l.ref(p.env), Key: *p.workspaceKey}, &ws)
		workspace = &ws.Path
	}
	if err != nil {
		msg := err.Error()
		if _, uerr := x.pool.Exec(context.WithoutCancel(ctx), `UPDATE environment_leases SET status = 'failed', failure_reason = $2,
			released_at = now(), updated_at = now() WHERE id = $1`, id, msg); uerr != nil {
			x.log.Error("error marking a lease failed", "lease", id, "error", uerr)
		}
		return nil, err
	}
	var meta []byte
	if len(got.Metadata) > 0 {
		meta = got.Metadata
	}
	if _, err := x.pool.Exec(ctx, `UPDATE environment_leases SET provider_lease_id = $2, metadata = $3, workspace_path = $4, updated_at = now()
		WHERE id = $1`, id, got.ProviderLeaseID, meta, workspace); err != nil {
		return nil, fmt.Errorf("error recording lease %s: %w", id, err)
	}
	return x.getLease(ctx, id)
}

// end moves an active lease to released or expired and tells the driver; a lease that is
// no longer active is left alone. A driver failure is logged: the lease is over for keel.
func (x *Environments) end(ctx context.Context, leaseID, status string) (*Lease, error) {
	l, err := scanLease(x.pool.QueryRow(ctx, `UPDATE environment_leases SET status = $2, released_at = now(), updated_at = now()
		WHERE id = $1 AND status = 'active' RETURNING `+leaseColumns, leaseID, status))
	if errors.Is(err, pgx.ErrNoRows) {
		return x.getLease(ctx, leaseID)
	}
	if err != nil {
		return nil, fmt.Errorf("error ending lease %s: %w", leaseID, err)
	}
	env, err := x.getEnv(ctx, l.EnvironmentID)
	if err != nil {
		return l, nil
	}
	if err := x.callDriver(ctx, env.CompanyID, env.Driver, sdk.EnvReleaseLeaseMethod, l.ref(env), nil); err != nil {
		x.log.Warn("the driver failed to release a lease", "lease", l.ID, "driver", env.Driver, "error", err)
	}
	return l, nil
}

// reap expires active leases whose time has passed and ends orphaned device logins, every
// reapInterval until ctx ends.
func (x *Environments) reap(ctx context.Context) {
	defer close(x.reaperDone)
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		x.reapLogins(ctx)
		rows, err := x.pool.Query(ctx, `SELECT id FROM environment_leases WHERE status = 'active' AND expires_at <= now() LIMIT 100`)
		if err != nil {
			if ctx.Err() == nil {
				x.log.Warn("error looking for expired leases", "error", err)
			}
			continue
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			continue
		}
		for _, id := range ids {
			if _, err := x.end(ctx, id, leaseExpired); err != nil && ctx.Err() == nil {
				x.log.Warn("error expiring a lease", "lease", id, "error", err)
			}
		}
	}
}

// LeaseAcquireInput is the input of environments.leases.acquire.
type LeaseAcquireInput struct {
	EnvironmentID string `json:"environmentId"`
	// Purpose says what holds the lease (run, manual, …).
	Purpose    string `json:"purpose"`
	HolderType string `json:"holderType,omitempty"`
	HolderID   string `json:"holderId,omitempty"`
	// TTLSeconds is how long the lease lasts unless released (default 3600, at most a week).
	TTLSeconds int `json:"ttlSeconds,omitempty"`
	// WorkspaceKey, when set, realizes a working directory of that key in the lease.
	WorkspaceKey *string `json:"workspaceKey,omitempty"`
}

// LeaseRef is the input of environments.leases.release and environments.leases.get.
type LeaseRef struct {
	LeaseID string `json:"leaseId"`
}

func init() {
	table.AddMethods(map[string]method{
		"leases.acquire": {Description: "Acquire a lease on an environment of the call's company (input environmentId, purpose, ttlSeconds, workspaceKey).",
			Call: (*Environments).methodAcquire},
		"leases.release": {Description: "Release a lease (input leaseId); a lease that already ended is returned as it is.",
			Call: (*Environments).methodRelease},
		"leases.get": {Description: "Read a lease (input leaseId).", Call: (*Environments).methodGet},
		"leases.destroy": {Description: "Release a lease and have its driver remove everything it held (input leaseId).",
			Call: (*Environments).methodDestroy},
		"leases.realizeWorkspace": {Description: "Make a working directory in an active lease (input leaseId, key); output {path}.",
			Call: (*Environments).methodRealize},
		"leases.execute": {Description: "Run a command (argument list) in an active lease and wait for it (input leaseId, argv, env, cwd, stdin, timeoutSec).",
			Call: (*Environments).methodExecute},
	})
}

func (x *Environments) methodAcquire(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in LeaseAcquireInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if in.Purpose == "" {
		return nil, sdk.Invalid("purpose", "is required")
	}
	if in.TTLSeconds == 0 {
		in.TTLSeconds = leaseTTLDefault
	}
	if in.TTLSeconds < 1 || in.TTLSeconds > leaseTTLMax {
		return nil, sdk.Invalid("ttlSeconds", "must be 1 to 604800")
	}
	env, err := x.getEnv(ctx, in.EnvironmentID)
	if err != nil {
		return nil, err
	}
	if call.CompanyID != "" && env.CompanyID != call.CompanyID {
		return nil, &sdk.Error{Status: http.StatusForbidden, Code: "environment_company_mismatch", Message: msgCompanyMismatch}
	}
	return x.acquire(ctx, &acquireParams{env: env, purpose: in.Purpose, holderType: in.HolderType, holderID: in.HolderID,
		expiresAt: time.Now().Add(time.Duration(in.TTLSeconds) * time.Second), workspaceKey: in.WorkspaceKey})
}

func (x *Environments) leaseOfCall(ctx context.Context, call *sdk.MethodCall) (*Lease, error) {
	var in LeaseRef
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	l, err := x.getLease(ctx, in.LeaseID)
	if err != nil {
		return nil, err
	}
	if call.CompanyID != "" && l.CompanyID != call.CompanyID {
		return nil, sdk.NotFound(msgLeaseNotFound)
	}
	return l, nil
}

func (x *Environments) methodRelease(ctx context.Context, call *sdk.MethodCall) (any, error) {
	l, err := x.leaseOfCall(ctx, call)
	if err != nil {
		return nil, err
	}
	return x.end(ctx, l.ID, leaseReleased)
}

func (x *Environments) methodGet(ctx context.Context, call *sdk.MethodCall) (any, error) {
	return x.leaseOfCall(ctx, call)
}

// activeLeaseOfCall loads the call's lease and its environment, and refuses a lease that
// is no longer active (409).
func (x *Environments) activeLeaseOfCall(ctx context.Context, call *sdk.MethodCall) (*Lease, *Environment, error) {
	l, err := x.leaseOfCall(ctx, call)
	if err != nil {
		return nil, nil, err
	}
	if l.Status != leaseActive {
		return nil, nil, sdk.Conflict(fmt.Sprintf("Environment lease is %s", l.Status))
	}
	env, err := x.getEnv(ctx, l.EnvironmentID)
	if err != nil {
		return nil, nil, err
	}
	return l, env, nil
}

func (x *Environments) methodDestroy(ctx context.Context, call *sdk.MethodCall) (any, error) {
	l, err := x.leaseOfCall(ctx, call)
	if err != nil {
		return nil, err
	}
	if l, err = x.end(ctx, l.ID, leaseReleased); err != nil {
		return nil, err
	}
	env, err := x.getEnv(ctx, l.EnvironmentID)
	if err != nil {
		return nil, err
	}
	if err := x.callDriver(ctx, env.CompanyID, env.Driver, sdk.EnvDestroyLeaseMethod, l.ref(env), nil); err != nil {
		return nil, fmt.Errorf("error destroying lease %s: %w", l.ID, err)
	}
	return l, nil
}

// WorkspaceInput is the input of environments.leases.realizeWorkspace.
type WorkspaceInput struct {
	LeaseID string `json:"leaseId"`
	Key     string `json:"key,omitempty"`
}

func (x *Environments) methodRealize(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in WorkspaceInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	l, env, err := x.activeLeaseOfCall(ctx, call)
	if err != nil {
		return nil, err
	}
	var ws sdk.EnvWorkspace
	if err := x.callDriver(ctx, env.CompanyID, env.Driver, sdk.EnvRealizeWorkspaceMethod,
		&sdk.EnvWorkspaceRequest{EnvLeaseRef: *l.ref(env), Key: in.Key}, &ws); err != nil {
		return nil, err
	}
	return &ws, nil
}

// ExecuteInput is the input of environments.leases.execute.
type ExecuteInput struct {
	LeaseID    string            `json:"leaseId"`
	Argv       []string          `json:"argv"`
	Env        map[string]string `json:"env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	Stdin      string            `json:"stdin,omitempty"`
	TimeoutSec float64           `json:"timeoutSec,omitempty"`
}

func (x *Environments) methodExecute(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in ExecuteInput
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	if len(in.Argv) == 0 || in.Argv[0] == "" {
		return nil, sdk.Invalid("argv", "must name a command")
	}
	l, env, err := x.activeLeaseOfCall(ctx, call)
	if err != nil {
		return nil, err
	}
	return x.execute(ctx, env.CompanyID, env.Driver, &sdk.EnvExecRequest{EnvLeaseRef: *l.ref(env), Argv: in.Argv, Env: in.Env,
		Cwd: in.Cwd, Stdin: in.Stdin, TimeoutSec: in.TimeoutSec})
}
