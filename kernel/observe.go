package kernel

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// RequestRecord is what the kernel reports about one finished HTTP request.
type RequestRecord struct {
	RequestID string
	Method    string
	Path      string
	// Route is the matched route template ("GET /api/companies/{companyId}"), empty when no
	// route matched.
	Route string
	// Owner is the route's owner: "kernel" or an extension key.
	Owner string
	// ActorKind is the resolved actor's type: board, agent or none.
	ActorKind string
	Status    int
	Duration  time.Duration
}

// RequestObserver sees every finished request (metrics, the access log). It runs on the
// request's goroutine after the response is written, so it must be cheap.
type RequestObserver interface {
	ObserveRequest(rec *RequestRecord)
}

// ReadinessCheck returns why the instance is not ready to serve (nothing when it is).
type ReadinessCheck func(ctx context.Context) []string

// SetRequestObserver sets the observer of finished requests; call it before NewApp.
func (k *Kernel) SetRequestObserver(o RequestObserver) { k.observer = o }

// SetMetricsHandler sets the handler of GET /metrics; call it before NewApp.
func (k *Kernel) SetMetricsHandler(h http.Handler) { k.metrics = h }

// AddReadinessCheck adds a check to readiness (GET /readyz and GET /api/health?ready=1).
func (k *Kernel) AddReadinessCheck(c ReadinessCheck) { k.readiness = append(k.readiness, c) }

// localsRequest is the Fiber locals key of the request's *RequestRecord.
const localsRequest = "keel.request"

// observe is the first middleware: it times the request and reports it once the handler
// (and the error handler) have written the response.
func (k *Kernel) observe(c *fiber.Ctx) error {
	if k.observer == nil {
		return c.Next()
	}
	start := time.Now()
	rec := &RequestRecord{}
	c.Locals(localsRequest, rec)
	err := c.Next()
	if err != nil {
		if herr := c.App().ErrorHandler(c, err); herr != nil {
			_ = c.SendStatus(fiber.StatusInternalServerError)
		}
	}
	rec.Method = c.Method()
	rec.Path = c.Path()
	rec.Status = c.Response().StatusCode()
	rec.Duration = time.Since(start)
	if rec.RequestID == "" {
		rec.RequestID = string(c.Response().Header.Peek("X-Request-Id"))
	}
	k.observer.ObserveRequest(rec)
	return nil
}

// noteRoute records the matched route and the actor for the observer.
func noteRoute(c *fiber.Ctx, reqID string, route *Route, actor *Actor) {
	rec, ok := c.Locals(localsRequest).(*RequestRecord)
	if !ok {
		return
	}
	rec.RequestID = reqID
	if route != nil {
		rec.Route, rec.Owner = route.Method+" "+route.Pattern, route.Owner
	}
	if actor != nil {
		rec.ActorKind = string(actor.Type)
	}
}

// metricsRoute and readyRoute name the two routes served outside /api in metrics and logs.
var (
	metricsRoute = &Route{Method: "GET", Pattern: "/metrics", Owner: "kernel"}
	readyRoute   = &Route{Method: "GET", Pattern: "/readyz", Owner: "kernel"}
)

// serveMetrics serves GET /metrics: open to the local board in local_trusted mode, to
// instance admins otherwise.
func (k *Kernel) serveMetrics(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		actor, apiErr := k.ResolveActor(c.UserContext(), RequestCredentials{
			Authorization: c.Get(fiber.HeaderAuthorization),
			SessionToken:  c.Cookies(SessionCookie),
		}, false)
		if apiErr != nil {
			return WriteError(c, apiErr)
		}
		noteRoute(c, requestID(c), metricsRoute, actor)
		if err := checkAccess(AccessInstanceAdmin, actor); err != nil {
			return WriteError(c, err)
		}
		return h(c)
	}
}

// Readiness is the body of GET /readyz and GET /api/health?ready=1.
type Readiness struct {
	Status string `json:"status"`
	// Problems says what is not up yet, sorted; empty when ready.
	Problems []string `json:"problems"`
}

// ready runs every readiness check: the database answers, the kernel's migrations are
// applied, and the checks added by the host (every enabled extension is up).
func (k *Kernel) ready(ctx context.Context) *Readiness {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	problems := []string{}
	if err := k.Pool.Ping(ctx); err != nil {
		problems = append(problems, "database is unreachable")
	} else if pending, err := k.pendingMigrations(ctx); err != nil {
		problems = append(problems, "error reading the applied migrations")
	} else if pending > 0 {
		problems = append(problems, "database migrations are pending")
	}
	for _, check := range k.readiness {
		problems = append(problems, check(ctx)...)
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return &Readiness{Status: "not_ready", Problems: problems}
	}
	return &Readiness{Status: "ready", Problems: problems}
}

// serveReady answers readiness: 200 when ready, 503 with the problems otherwise.
func (k *Kernel) serveReady(c *fiber.Ctx) error {
	r := k.ready(c.UserContext())
	noteRoute(c, requestID(c), readyRoute, nil)
	if r.Status != "ready" {
		return WriteJSON(c, http.StatusServiceUnavailable, r)
	}
	return WriteJSON(c, http.StatusOK, r)
}

// mountObservability adds the observer middleware, /metrics and /readyz to app.
func (k *Kernel) mountObservability(app *fiber.App) {
	app.Use(k.observe)
	if k.metrics != nil {
		app.Get("/metrics", k.serveMetrics(adaptor.HTTPHandler(k.metrics)))
	}
	app.Get("/readyz", k.serveReady)
}
