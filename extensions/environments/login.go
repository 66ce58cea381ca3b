package environments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/adapter"
)

// Device-login limits (REFERENCE-plugins.md C.8: ttlSeconds 60-86400, default 300).
const (
	loginTTLDefault = 300
	loginTTLMin     = 60
	loginTTLMax     = 86400
)

// Device-login texts.
const (
	msgLoginInvalid   = "The device login start request is invalid."
	msgLoginNotFound  = "Login session not found"
	msgLoginInFlight  = "A device login for this adapter is already in flight"
	fmtLoginUnsupport = `Adapter "%s" does not support a device login.`
)

// Session states (public).
const (
	loginStarting      = "starting"
	loginWaiting       = "waiting_for_user"
	loginAuthenticated = "authenticated"
	loginFailed        = "failed"
	loginTimedOut      = "timed_out"
	loginCancelled     = "cancelled"
)

// Why a login's context ended.
var (
	errStopped   = errors.New("the environments extension stopped")
	errCancelled = errors.New("the login was cancelled")
)

func init() {
	const base = "/api/companies/{companyId}/adapters/{type}/login-sessions"
	addRoutes(
		route{Method: http.MethodPost, Path: base, Status: http.StatusCreated, Response: new(LoginSession), CompanyFromPath: true,
			Access: sdk.AccessBoard, Permission: "agents:create", Errors: []int{http.StatusConflict},
			Summary: "Start an adapter device login in an environment (body environmentId, ttlSeconds 60-86400); 409 while one is in flight",
			Handle:  (*Environments).handleLoginStart},
		route{Method: http.MethodGet, Path: base + "/{sessionId}", Response: new(LoginSession), CompanyFromPath: true,
			Access: sdk.AccessBoard, Permission: "agents:create",
			Summary: "A device login's state plus, for the user who started it, the code and URL to finish it",
			Handle:  (*Environments).handleLoginGet},
		route{Method: http.MethodPost, Path: base + "/{sessionId}/cancel", Response: new(LoginSession), CompanyFromPath: true,
			Access: sdk.AccessBoard, Permission: "agents:create",
			Summary: "Cancel a device login (stops the CLI and releases its lease)", Handle: (*Environments).handleLoginCancel},
	)
}

// LoginSession is a device login as its owner sees it.
type LoginSession struct {
	SessionID     string `json:"sessionId"`
	EnvironmentID string `json:"environmentId"`
	AdapterType   string `json:"adapterType"`
	// Status is starting, waiting_for_user, authenticated, failed, timed_out or cancelled.
	Status    string        `json:"status"`
	ExpiresAt *time.Time    `json:"expiresAt"`
	Failure   *LoginFailure `json:"failure"`
	// Prompt is the URL to open and the code to enter, once the CLI printed them (kept in
	// memory only, shown only to the user who started the login).
	Prompt    *LoginPrompt `json:"prompt"`
	LeaseID   *string      `json:"leaseId"`
	CreatedAt time.Time    `json:"createdAt"`
}

// LoginFailure says why a login did not succeed.
type LoginFailure struct {
	Reason  string  `json:"reason"`
	Message *string `json:"message"`
}

// LoginPrompt is what the user needs to finish a login.
type LoginPrompt struct {
	URL  string `json:"url"`
	Code string `json:"code"`
}

// loginRun is a login running in this process.
type loginRun struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
	mu     sync.Mutex
	prompt *LoginPrompt
}

func (l *loginRun) getPrompt() *LoginPrompt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prompt == nil || l.prompt.URL == "" || l.prompt.Code == "" {
		return nil
	}
	p := *l.prompt
	return &p
}

// loginRow is a stored session.
type loginRow struct {
	LoginSession
	companyID string
	startedBy string
}

const loginColumns = `id, company_id, environment_id, adapter_type, started_by_user_id, lease_id, status, expires_at,
	failure_reason, failure_message, created_at`

func scanLogin(row pgx.Row) (*loginRow, error) {
	var l loginRow
	var reason, message *string
	var expires time.Time
	if err := row.Scan(&l.SessionID, &l.companyID, &l.EnvironmentID, &l.AdapterType, &l.startedBy, &l.LeaseID, &l.Status,
		&expires, &reason, &message, &l.CreatedAt); err != nil {
		return nil, err
	}
	l.ExpiresAt = &expires
	if reason != nil {
		l.Failure = &LoginFailure{Reason: *reason, Message: message}
	}
	return &l, nil
}

// deviceLoginOf asks the adapter serving a type for its device login; a type without one
// (or one nothing serves) is the spec's 400.
func (x *Environments) deviceLoginOf(ctx context.Context, companyID, adapterType string) (*adapter.DeviceLogin, error) {
	unsupported := sdk.NewError(http.StatusBadRequest, fmt.Sprintf(fmtLoginUnsupport, adapterType))
	var res adapter.Resolution
	if err := x.host.Call(ctx, adapter.ResolveMethod, sdk.SystemActor(), companyID, adapter.ResolveRequest{Type: adapterType}, &res); err != nil {
		if sdk.IsMethodNotProvided(err) {
			return nil, unsupported
		}
		var e *sdk.Error
		if errors.As(err, &e) && e.Status < 500 {
			return nil, unsupported
		}
		return nil, fmt.Errorf("error resolving adapter %s: %w", adapterType, err)
	}
	var info adapter.Info
	if err := x.host.Call(ctx, adapter.MethodOf(res.Key, adapter.MethodInfo), sdk.SystemActor(), companyID, struct{}{}, &info); err != nil {
		if sdk.IsMethodNotProvided(err) {
			return nil, unsupported
		}
		return nil, fmt.Errorf("error describing adapter %s: %w", adapterType, err)
	}
	if info.DeviceLogin == nil || len(info.DeviceLogin.Argv) == 0 {
		return nil, unsupported
	}
	return info.DeviceLogin, nil
}

// loginStartBody is the body of the start route.
type loginStartBody struct {
	EnvironmentID string           `json:"environmentId"`
	TTLSeconds    *json.RawMessage `json:"ttlSeconds,omitempty"`
}

// parseLoginStart decodes the start body strictly; anything wrong is the one 400.
func parseLoginStart(r *http.Request) (envID string, ttl int, err error) {
	invalid := sdk.NewError(http.StatusBadRequest, msgLoginInvalid)
	var body loginStartBody
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || !sdk.IsUUID(strings.ToLower(body.EnvironmentID)) {
		return "", 0, invalid
	}
	ttl = loginTTLDefault
	if body.TTLSeconds != nil && string(*body.TTLSeconds) != "null" {
		var f float64
		if err := json.Unmarshal(*body.TTLSeconds, &f); err != nil || f != float64(int(f)) || f < loginTTLMin || f > loginTTLMax {
			return "", 0, invalid
		}
		ttl = int(f)
	}
	return strings.ToLower(body.EnvironmentID), ttl, nil
}

func (x *Environments) handleLoginStart(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID, adapterType := r.PathValue("companyId"), r.PathValue("type")
	actor := sdk.ActorFrom(ctx)
	if actor == nil || actor.UserId == "" {
		x.writeErr(rw, sdk.Forbidden("A signed-in board user is required to start a device login"))
		return
	}
	login, err := x.deviceLoginOf(ctx, companyID, adapterType)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	envID, ttl, err := parseLoginStart(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	env, err := x.getEnv(ctx, envID)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	if env.CompanyID != companyID {
		x.writeErr(rw, &sdk.Error{Status: http.StatusForbidden, Code: "environment_company_mismatch", Message: msgCompanyMismatch})
		return
	}
	if env.Status != "active" {
		x.writeErr(rw, sdk.Conflict(msgNotActive))
		return
	}
	id, now := newID(), nowUTC()
	expires := now.Add(time.Duration(ttl) * time.Second)
	_, err = x.pool.Exec(ctx, `INSERT INTO adapter_login_sessions (id, company_id, environment_id, adapter_type, started_by_user_id,
		expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`, id, companyID, env.ID, adapterType, actor.UserId, expires, now)
	if isUniqueViolation(err) {
		x.writeErr(rw, &sdk.Error{Status: http.StatusConflict, Code: "login_in_flight", Message: msgLoginInFlight})
		return
	}
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error recording a device login: %w", err))
		return
	}
	run := &loginRun{done: make(chan struct{}), prompt: &LoginPrompt{}}
	lctx, cancel := context.WithCancelCause(context.Background())
	lctx, cancelTTL := context.WithDeadline(lctx, expires)
	run.cancel = func(cause error) { cancel(cause); cancelTTL() }
	x.loginsMu.Lock()
	x.logins[id] = run
	x.loginsMu.Unlock()
	go x.runLogin(lctx, run, id, env, login, expires)
	x.activity(ctx, companyID, "adapter.login_started", "adapter_login_session", id,
		map[string]any{"adapterType": adapterType, "environmentId": env.ID, "ttlSeconds": ttl})
	s, err := x.loginView(ctx, id)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusCreated, s)
}

// Default patterns of the device-code output (REFERENCE-plugins.md C.8: codex login
// --device-auth prints a verification URL and a one-time code such as ABCD-12345).
var (
	defaultURLPattern  = regexp.MustCompile(`https?://[^\s"'<>]+`)
	defaultCodePattern = regexp.MustCompile(`\b([A-Z0-9]{4,}(?:-[A-Z0-9]{4,})+)\b`)
	ansiPattern        = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)
)

// match returns the first group of re in line, or its whole match.
func match(re *regexp.Regexp, line string) string {
	m := re.FindStringSubmatch(line)
	switch {
	case m == nil:
		return ""
	case len(m) > 1 && m[1] != "":
		return m[1]
	default:
		return m[0]
	}
}

// runLogin acquires a lease, runs the login command in it, surfaces the code and URL, and
// records how the login ended; the lease is released either way.
func (x *Environments) runLogin(ctx context.Context, run *loginRun, id string, env *Environment, login *adapter.DeviceLogin, expires time.Time) {
	bg := context.WithoutCancel(ctx)
	defer func() {
		x.loginsMu.Lock()
		delete(x.logins, id)
		x.loginsMu.Unlock()
		close(run.done)
	}()
	finish := func(status, reason, message string) {
		var r, m *string
		if reason != "" {
			r = &reason
		}
		if message != "" {
			m = &message
		}
		if _, err := x.pool.Exec(bg, `UPDATE adapter_login_sessions SET status = $2, failure_reason = $3, failure_message = $4,
			finished_at = now(), updated_at = now() WHERE id = $1 AND status IN ('starting', 'waiting_for_user')`, id, status, r, m); err != nil {
			x.log.Error("error recording the end of a device login", "session", id, "error", err)
		}
	}
	lease, err := x.acquire(ctx, &acquireParams{env: env, purpose: "login_session", holderType: "login_session", holderID: id, expiresAt: expires})
	if err != nil {
		x.endedEarly(ctx, finish, "lease_acquire_failed", err)
		return
	}
	defer func() {
		if _, err := x.end(bg, lease.ID, leaseReleased); err != nil {
			x.log.Warn("error releasing a device login's lease", "lease", lease.ID, "error", err)
		}
	}()
	if _, err := x.pool.Exec(ctx, `UPDATE adapter_login_sessions SET lease_id = $2, updated_at = now() WHERE id = $1`, id, lease.ID); err != nil {
		x.endedEarly(ctx, finish, "session_transition_failed", err)
		return
	}
	urlRe, codeRe := defaultURLPattern, defaultCodePattern
	if login.URLPattern != "" {
		if re, err := regexp.Compile(login.URLPattern); err == nil {
			urlRe = re
		}
	}
	if login.CodePattern != "" {
		if re, err := regexp.Compile(login.CodePattern); err == nil {
			codeRe = re
		}
	}
	// The failure message is the last line the CLI wrote to stderr, else to stdout.
	var lastOut, lastErr string
	onOutput := func(stream, line string) {
		line = strings.TrimSpace(ansiPattern.ReplaceAllString(line, ""))
		if line == "" {
			return
		}
		if stream == "stderr" {
			lastErr = line
		} else {
			lastOut = line
		}
		run.mu.Lock()
		if run.prompt.URL == "" {
			run.prompt.URL = match(urlRe, line)
		}
		if run.prompt.Code == "" {
			if c := match(codeRe, line); c != "" && !strings.Contains(line, "://") {
				run.prompt.Code = c
			}
		}
		ready := run.prompt.URL != "" && run.prompt.Code != ""
		run.mu.Unlock()
		if ready {
			if _, err := x.pool.Exec(bg, `UPDATE adapter_login_sessions SET status = 'waiting_for_user', updated_at = now()
				WHERE id = $1 AND status = 'starting'`, id); err != nil {
				x.log.Warn("error recording a device login's code", "session", id, "error", err)
			}
		}
	}
	res, err := x.execute(ctx, env.CompanyID, env.Driver, &sdk.EnvExecRequest{EnvLeaseRef: *lease.ref(env), Argv: login.Argv, Env: login.Env,
		TimeoutSec: time.Until(expires).Seconds() + 1, OnOutput: onOutput})
	switch {
	case ctx.Err() != nil:
		x.endedEarly(ctx, finish, "", ctx.Err())
	case err != nil:
		finish(loginFailed, "login_command_failed", err.Error())
	case res.TimedOut:
		finish(loginTimedOut, "timed_out", "The login was not finished before the session expired")
	case res.ExitCode == 0:
		finish(loginAuthenticated, "", "")
	default:
		msg := fmt.Sprintf("The login command exited with code %d", res.ExitCode)
		last := lastErr
		if last == "" {
			last = lastOut
		}
		if last != "" {
			msg += ": " + last
		}
		if len(msg) > 1000 {
			msg = msg[:1000]
		}
		finish(loginFailed, "login_failed", msg)
	}
}

// endedEarly records a login that ended because its context did (cancel, TTL, stop) or
// because a step failed.
func (x *Environments) endedEarly(ctx context.Context, finish func(status, reason, message string), reason string, err error) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errCancelled):
		finish(loginCancelled, "", "")
	case errors.Is(cause, errStopped):
		finish(loginFailed, "interrupted", "The login was interrupted by a restart")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		finish(loginTimedOut, "timed_out", "The login was not finished before the session expired")
	default:
		if reason == "" {
			reason = "unknown"
		}
		finish(loginFailed, reason, err.Error())
	}
}

// loginView reads a session with the in-memory prompt.
func (x *Environments) loginView(ctx context.Context, id string) (*LoginSession, error) {
	row, err := scanLogin(x.pool.QueryRow(ctx, `SELECT `+loginColumns+` FROM adapter_login_sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sdk.NotFound(msgLoginNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error loading login session %s: %w", id, err)
	}
	s := row.LoginSession
	x.loginsMu.Lock()
	run := x.logins[id]
	x.loginsMu.Unlock()
	if run != nil && (s.Status == loginStarting || s.Status == loginWaiting) {
		s.Prompt = run.getPrompt()
	}
	return &s, nil
}

// loginForRoute loads the path's session: another company's, another adapter type's or
// another user's session is 404, so sessions cannot be enumerated.
func (x *Environments) loginForRoute(r *http.Request) (*LoginSession, error) {
	ctx := r.Context()
	id := strings.ToLower(r.PathValue("sessionId"))
	if !sdk.IsUUID(id) {
		return nil, sdk.NotFound(msgLoginNotFound)
	}
	row, err := scanLogin(x.pool.QueryRow(ctx, `SELECT `+loginColumns+` FROM adapter_login_sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sdk.NotFound(msgLoginNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("error loading login session %s: %w", id, err)
	}
	a := sdk.ActorFrom(ctx)
	if row.companyID != r.PathValue("companyId") || row.AdapterType != r.PathValue("type") || a == nil || a.UserId != row.startedBy {
		return nil, sdk.NotFound(msgLoginNotFound)
	}
	return x.loginView(ctx, id)
}

func (x *Environments) handleLoginGet(rw http.ResponseWriter, r *http.Request) {
	s, err := x.loginForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rw.Header().Set("Cache-Control", "no-store, private")
	sdk.WriteJSON(rw, http.StatusOK, s)
}

func (x *Environments) handleLoginCancel(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, err := x.loginForRoute(r)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	// The slot is freed durably first; then the running command is stopped.
	if _, err := x.pool.Exec(ctx, `UPDATE adapter_login_sessions SET status = 'cancelled', finished_at = now(), updated_at = now()
		WHERE id = $1 AND status IN ('starting', 'waiting_for_user')`, s.SessionID); err != nil {
		x.writeErr(rw, fmt.Errorf("error cancelling login session %s: %w", s.SessionID, err))
		return
	}
	x.loginsMu.Lock()
	run := x.logins[s.SessionID]
	x.loginsMu.Unlock()
	if run != nil {
		run.cancel(errCancelled)
		select {
		case <-run.done:
		case <-ctx.Done():
		}
	}
	if s, err = x.loginView(ctx, s.SessionID); err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, s)
}

// loginStaleAfter is how long a login in flight may go without its process's heartbeat
// before it counts as interrupted (its process stopped or its node went away).
const loginStaleAfter = 30 * time.Second

// reapLogins beats the heart of the logins this process runs (their updated_at), and marks
// failed (interrupted) the in-flight logins nobody has beaten for loginStaleAfter, so a
// restarted or lost process frees its company's slot on any node.
func (x *Environments) reapLogins(ctx context.Context) {
	x.loginsMu.Lock()
	ids := make([]string, 0, len(x.logins))
	for id := range x.logins {
		ids = append(ids, id)
	}
	x.loginsMu.Unlock()
	if len(ids) > 0 {
		if _, err := x.pool.Exec(ctx, `UPDATE adapter_login_sessions SET updated_at = now()
			WHERE id = ANY($1::uuid[]) AND status IN ('starting', 'waiting_for_user')`, ids); err != nil && ctx.Err() == nil {
			x.log.Warn("error beating device logins' heart", "error", err)
		}
	}
	if _, err := x.pool.Exec(ctx, `UPDATE adapter_login_sessions SET status = 'failed', failure_reason = 'interrupted',
		failure_message = 'The login was interrupted: the process running it stopped', finished_at = now(), updated_at = now()
		WHERE status IN ('starting', 'waiting_for_user') AND updated_at < now() - $1::interval`,
		fmt.Sprintf("%d seconds", int(loginStaleAfter.Seconds()))); err != nil && ctx.Err() == nil {
		x.log.Warn("error ending interrupted device logins", "error", err)
	}
}
