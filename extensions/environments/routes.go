package environments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelhq/keel/sdk"
)

// permManage is the permission every environment change needs (REFERENCE.md permission keys).
const permManage = "environments:manage"

// Error texts (the spec leaves them open; plain English).
const (
	msgEnvNotFound     = "Environment not found"
	msgLeaseNotFound   = "Environment lease not found"
	msgNameTaken       = "An environment with this name already exists in the company"
	msgActiveLeases    = "Environment has active leases; release them before deleting it"
	msgNotActive       = "Environment is not active"
	msgCompanyMismatch = "Environment belongs to another company"
)

func init() {
	const base = "/api/companies/{companyId}/environments"
	addRoutes(
		route{Method: http.MethodGet, Path: base, Response: new([]Environment), CompanyFromPath: true, Access: sdk.AccessBoard,
			Summary: "List a company's environments (local and plugin-driver backends), oldest first", Handle: (*Environments).handleList},
		route{Method: http.MethodPost, Path: base, Status: http.StatusCreated, Response: new(Environment), CompanyFromPath: true,
			Access: sdk.AccessBoard, Permission: permManage, Body: EnvironmentCreateBody{}, Errors: []int{http.StatusConflict, http.StatusUnprocessableEntity},
			Summary: "Create an environment on a driver (config validated by the driver's schema and the driver)", Handle: (*Environments).handleCreate},
		route{Method: http.MethodGet, Path: base + "/capabilities", Response: new(Capabilities), CompanyFromPath: true, Access: sdk.AccessBoard,
			Summary: "Environment drivers available here (built-in local and plugin-declared) with their config schemas", Handle: (*Environments).handleCapabilities},
		route{Method: http.MethodPost, Path: base + "/probe-config", Response: new(ProbeResult), CompanyFromPath: true, Access: sdk.AccessBoard,
			Permission: permManage, Body: ProbeConfigBody{}, Errors: []int{http.StatusUnprocessableEntity},
			Summary: "Validate and probe a candidate environment config without saving it", Handle: (*Environments).handleProbeConfig},
		route{Method: http.MethodGet, Path: "/api/environments/{id}", Response: new(Environment), Access: sdk.AccessBoard,
			Summary: "Get an environment", Handle: (*Environments).handleGet},
		route{Method: http.MethodPatch, Path: "/api/environments/{id}", Response: new(Environment), Access: sdk.AccessBoard,
			Body: EnvironmentPatchBody{}, Errors: []int{http.StatusConflict, http.StatusUnprocessableEntity},
			Summary: "Update an environment's name, description, config or status (active, archived)", Handle: (*Environments).handlePatch},
		route{Method: http.MethodDelete, Path: "/api/environments/{id}", Response: new(Environment), Access: sdk.AccessBoard,
			Errors:  []int{http.StatusConflict},
			Summary: "Delete an environment without active leases (with its lease history)", Handle: (*Environments).handleDelete},
		route{Method: http.MethodPost, Path: "/api/environments/{id}/probe", Response: new(ProbeResult), Access: sdk.AccessBoard,
			Summary: "Probe an environment through its driver and record the result", Handle: (*Environments).handleProbe},
		route{Method: http.MethodGet, Path: "/api/environments/{id}/leases", Response: new([]Lease), Access: sdk.AccessBoard,
			Query:   leaseListQuery{},
			Summary: "An environment's leases, newest first (status active, released, expired or failed)", Handle: (*Environments).handleLeases},
		route{Method: http.MethodGet, Path: "/api/environment-leases/{leaseId}", Response: new(Lease), Access: sdk.AccessBoard,
			Summary: "Get an environment lease", Handle: (*Environments).handleLease},
	)
}

// Environment is an execution backend of a company.
type Environment struct {
	ID          string          `json:"id"`
	CompanyID   string          `json:"companyId"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Driver      string          `json:"driver"`
	Config      json.RawMessage `json:"config"`
	// Status is active or archived; an archived environment takes no new leases.
	Status       string          `json:"status"`
	LastProbe    json.RawMessage `json:"lastProbe"`
	LastProbedAt *time.Time      `json:"lastProbedAt"`
	// ActiveLeaseCount is how many leases hold the environment now.
	ActiveLeaseCount int       `json:"activeLeaseCount"`
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
}

// EnvironmentCreateBody is the body of POST /api/companies/{companyId}/environments.
type EnvironmentCreateBody struct {
	// Name is 1-120 characters, unique in the company.
	Name string `json:"name" jsonschema:"minLength=1,maxLength=120"`
	// Description is up to 2000 characters.
	Description *string `json:"description,omitempty" jsonschema:"maxLength=2000"`
	// Driver is local (built in) or a driver a plugin declares (default local).
	Driver string `json:"driver,omitempty"`
	// Config is the driver's config object.
	Config json.RawMessage `json:"config,omitempty"`
}

// EnvironmentPatchBody is the body of PATCH /api/environments/{id}.
type EnvironmentPatchBody struct {
	Name        *string                `json:"name,omitempty" jsonschema:"minLength=1,maxLength=120"`
	Description sdk.PatchField[string] `json:"description,omitempty"`
	Config      json.RawMessage        `json:"config,omitempty"`
	Status      *string                `json:"status,omitempty" jsonschema:"enum=active,enum=archived"`
}

// ProbeConfigBody is the body of POST …/environments/probe-config.
type ProbeConfigBody struct {
	Driver string          `json:"driver,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
}

// ProbeResult is the answer of a probe.
type ProbeResult struct {
	OK       bool           `json:"ok"`
	Driver   string         `json:"driver"`
	Status   string         `json:"status"`
	Message  string         `json:"message,omitempty"`
	Details  map[string]any `json:"details,omitempty"`
	TestedAt time.Time      `json:"testedAt"`
}

const envColumns = `e.id, e.company_id, e.name, e.description, e.driver, e.config, e.status, e.last_probe, e.last_probed_at,
	e.created_at, e.updated_at, (SELECT count(*) FROM environment_leases l WHERE l.environment_id = e.id AND l.status = 'active')`

func scanEnv(row pgx.Row) (*Environment, error) {
	var e Environment
	var cfg, probe []byte
	if err := row.Scan(&e.ID, &e.CompanyID, &e.Name, &e.Description, &e.Driver, &cfg, &e.Status, &probe, &e.LastProbedAt,
		&e.CreatedAt, &e.UpdatedAt, &e.ActiveLeaseCount); err != nil {
		return nil, err
	}
	e.Config = cfg
	if probe != nil {
		e.LastProbe = probe
	}
	return &e, nil
}

// nowUTC is the current time at the database's precision.
func nowUTC() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// newID returns a time-ordered UUID.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// getEnv loads an environment by id; a malformed or unknown id is 404.
func (x *Environments) getEnv(ctx context.Context, id string) (*Environment, error) {
	if !sdk.IsUUID(id) {
		return nil, sdk.NotFound(msgEnvNotFound)
	}
	e, err := scanEnv(x.pool.QueryRow(ctx, `SELECT `+envColumns+` FROM environments e WHERE e.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sdk.NotFound(msgEnvNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error loading environment %s: %w", id, err)
	}
	return e, nil
}

// envForRoute loads the path's environment and checks the caller may see it, and change
// it on a write route.
func (x *Environments) envForRoute(r *http.Request) (*Environment, error) {
	ctx := r.Context()
	e, err := x.getEnv(ctx, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if err := sdk.RequireCompanyAccess(ctx, e.CompanyID); err != nil {
		return nil, err
	}
	if sdk.IsWriteRequest(ctx) {
		if err := x.host.RequirePermission(ctx, e.CompanyID, permManage); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (x *Environments) handleList(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rows, err := x.pool.Query(ctx, `SELECT `+envColumns+` FROM environments e WHERE e.company_id = $1 ORDER BY e.created_at, e.id`,
		r.PathValue("companyId"))
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing environments: %w", err))
		return
	}
	out := []*Environment{}
	for rows.Next() {
		e, err := scanEnv(rows)
		if err != nil {
			rows.Close()
			x.writeErr(rw, fmt.Errorf("error reading environments: %w", err))
			return
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		x.writeErr(rw, fmt.Errorf("error listing environments: %w", err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}

// checkName trims and checks a name.
func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if n := utf8.RuneCountInString(name); n < 1 || n > 120 {
		return "", sdk.Invalid("name", "must be 1 to 120 characters")
	}
	return name, nil
}

// isUniqueViolation reports a unique-index conflict.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func (x *Environments) handleCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := r.PathValue("companyId")
	var body EnvironmentCreateBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	name, err := checkName(body.Name)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.Description != nil && utf8.RuneCountInString(*body.Description) > 2000 {
		x.writeErr(rw, sdk.Invalid("description", "must be at most 2000 characters"))
		return
	}
	if body.Driver == "" {
		body.Driver = localDriverKey
	}
	d, err := x.driverFor(ctx, companyID, body.Driver)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	id := newID()
	cfg, err := x.validateConfig(ctx, companyID, d, id, body.Config)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	now := nowUTC()
	_, err = x.pool.Exec(ctx, `INSERT INTO environments (id, company_id, name, description, driver, config, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, id, companyID, name, body.Description, d.Driver, []byte(cfg), actorID(ctx), now)
	if isUniqueViolation(err) {
		x.writeErr(rw, sdk.Conflict(msgNameTaken))
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error creating environment: %w", err))
		return
	}
	e, err := x.getEnv(ctx, id)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, companyID, "environment.created", "environment", id, map[string]any{"name": name, "driver": d.Driver})
	sdk.WriteJSON(rw, http.StatusCreated, e)
}

// activity logs an environment change in its company's activity log, as the request's
// actor; a failure is logged, the change stands.
func (x *Environments) activity(ctx context.Context, companyID, action, entityType, entityID string, details any) {
	if err := x.host.LogActivity(ctx, &sdk.ActivityEntry{CompanyID: companyID, Actor: sdk.ActorFrom(ctx), Action: action,
		EntityType: entityType, EntityID: entityID, Details: details}); err != nil {
		x.log.Warn("error logging activity", "action", action, "error", err)
	}
}

// actorID is the id of the request's user or agent ("" for the system).
func actorID(ctx context.Context) string {
	a := sdk.ActorFrom(ctx)
	if a == nil {
		return ""
	}
	if a.UserId != "" {
		return a.UserId
	}
	return a.AgentId
}

func (x *Environments) handleCapabilities(rw http.ResponseWriter, r *http.Request) {
	list, err := x.drivers(r.Context(), r.PathValue("companyId"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, &Capabilities{Drivers: list, DeviceLogin: true})
}

// probe validates a config, then asks the driver to probe it.
func (x *Environments) probe(ctx context.Context, companyID, driver, envID string, config json.RawMessage) (*ProbeResult, error) {
	d, err := x.driverFor(ctx, companyID, driver)
	if err != nil {
		return nil, err
	}
	cfg, err := x.validateConfig(ctx, companyID, d, envID, config)
	if err != nil {
		return nil, err
	}
	var res sdk.EnvProbeResult
	if err := x.callDriver(ctx, companyID, d.Driver, sdk.EnvProbeMethod,
		&sdk.EnvironmentRef{Driver: d.Driver, EnvironmentID: envID, CompanyID: companyID, Config: cfg}, &res); err != nil {
		var e *sdk.Error
		if errors.As(err, &e) && e.Status < 500 {
			return nil, err
		}
		res = sdk.EnvProbeResult{Status: "fail", Message: err.Error()}
	}
	switch res.Status {
	case "pass", "warn", "fail":
	default:
		res.Status = "fail"
	}
	return &ProbeResult{OK: res.Status != "fail", Driver: d.Driver, Status: res.Status, Message: res.Message, Details: res.Details,
		TestedAt: nowUTC()}, nil
}

func (x *Environments) handleProbeConfig(rw http.ResponseWriter, r *http.Request) {
	var body ProbeConfigBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	if body.Driver == "" {
		body.Driver = localDriverKey
	}
	res, err := x.probe(r.Context(), r.PathValue("companyId"), body.Driver, "", body.Config)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, res)
}

func (x *Environments) handleGet(rw http.ResponseWriter, r *http.Request) {
	e, err := x.envForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, e)
}

func (x *Environments) handlePatch(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	e, err := x.envForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	var body EnvironmentPatchBody
	if err := sdk.DecodeJSONStrict(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	name, desc, status, cfg := e.Name, e.Description, e.Status, e.Config
	if body.Name != nil {
		if name, err = checkName(*body.Name); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	if body.Description.Set {
		if body.Description.Null {
			desc = nil
		} else if utf8.RuneCountInString(body.Description.Value) > 2000 {
			x.writeErr(rw, sdk.Invalid("description", "must be at most 2000 characters"))
			return
		} else {
			v := body.Description.Value
			desc = &v
		}
	}
	if body.Status != nil {
		if *body.Status != "active" && *body.Status != "archived" {
			x.writeErr(rw, sdk.Invalid("status", "must be active or archived"))
			return
		}
		status = *body.Status
	}
	if len(body.Config) > 0 {
		d, err := x.driverFor(ctx, e.CompanyID, e.Driver)
		if err != nil {
			x.writeErr(rw, err)
			return
		}
		if cfg, err = x.validateConfig(ctx, e.CompanyID, d, e.ID, body.Config); err != nil {
			x.writeErr(rw, err)
			return
		}
	}
	_, err = x.pool.Exec(ctx, `UPDATE environments SET name = $2, description = $3, status = $4, config = $5, updated_at = $6 WHERE id = $1`,
		e.ID, name, desc, status, []byte(cfg), nowUTC())
	if isUniqueViolation(err) {
		x.writeErr(rw, sdk.Conflict(msgNameTaken))
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error updating environment %s: %w", e.ID, err))
		return
	}
	if e, err = x.getEnv(ctx, e.ID); err != nil {
		x.writeErr(rw, err)
		return
	}
	x.activity(ctx, e.CompanyID, "environment.updated", "environment", e.ID, map[string]any{"name": e.Name, "status": e.Status,
		"configChanged": len(body.Config) > 0})
	sdk.WriteJSON(rw, http.StatusOK, e)
}

func (x *Environments) handleDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	e, err := x.envForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	tag, err := x.pool.Exec(ctx, `DELETE FROM environments e WHERE e.id = $1
		AND NOT EXISTS (SELECT 1 FROM environment_leases l WHERE l.environment_id = e.id AND l.status = 'active')`, e.ID)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error deleting environment %s: %w", e.ID, err))
		return
	}
	if tag.RowsAffected() == 0 {
		x.writeErr(rw, sdk.Conflict(msgActiveLeases))
		return
	}
	x.activity(ctx, e.CompanyID, "environment.deleted", "environment", e.ID, map[string]any{"name": e.Name, "driver": e.Driver})
	sdk.WriteJSON(rw, http.StatusOK, e)
}

func (x *Environments) handleProbe(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	e, err := x.envForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	res, err := x.probe(ctx, e.CompanyID, e.Driver, e.ID, e.Config)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	b, _ := json.Marshal(res)
	if _, err := x.pool.Exec(ctx, `UPDATE environments SET last_probe = $2, last_probed_at = $3 WHERE id = $1`, e.ID, b, res.TestedAt); err != nil {
		x.writeErr(rw, fmt.Errorf("error recording the probe of environment %s: %w", e.ID, err))
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, res)
}
