// Package board is keel's web board: server-rendered HTML (a-h/templ components) with htmx
// for partial updates and the company event stream for live ones, served by `keel serve`
// at / beside the API. The board is a client of keel's own API: every page's data comes
// from in-process API requests made with the visitor's own credentials (see apiClient), so
// it shows and does only what the visitor may.
package board

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/kernel"
)

//go:generate go tool templ generate

// Config is what the board needs from the host.
type Config struct {
	// App is the host's Fiber app; the board calls the API through its handler and mounts
	// its own pages on it.
	App *fiber.App
	// Secret keys the CSRF tokens (the instance secret).
	Secret []byte
	// Mode is the deployment mode (local_trusted or authenticated).
	Mode string
	// SecureCookies marks the board's cookies Secure (a public https deployment).
	SecureCookies bool
}

// Board serves the board pages.
type Board struct {
	api  *apiClient
	csrf *csrfGuard
	mode string
}

// Mount adds the board's routes to cfg.App: the content-hashed assets and the pages, all
// outside /api.
func Mount(cfg Config) *Board {
	app := cfg.App
	b := &Board{
		api:  &apiClient{handler: sync.OnceValue(app.Handler)},
		csrf: newCSRFGuard(cfg.Secret, cfg.SecureCookies),
		mode: cfg.Mode,
	}
	app.Get(assetPrefix+"*", securityHeaders, serveAsset)
	g := app.Group("", startTimer, securityHeaders, b.csrf.handle)
	g.Get("/", b.home)
	g.Get("/signin", b.signInForm)
	g.Post("/signin", b.signIn)
	g.Post("/signup", b.signUp)
	g.Post("/signout", b.signOut)
	g.Post("/claim-admin", b.claimAdmin)
	g.Get("/switch", b.switchCompany)
	g.Get("/companies", b.companies)
	g.Post("/companies", b.createCompany)
	g.Get("/c/:companyId", b.dashboard)
	b.mountWorkGraph(g)
	g.Get("/c/:companyId/issues", b.issues)
	g.Get("/c/:companyId/issues/:issueId", b.issue)
	g.Get("/c/:companyId/issues/:issueId/live", b.issueLiveFragment)
	g.Post("/c/:companyId/issues/:issueId", b.updateIssue)
	g.Post("/c/:companyId/issues/:issueId/comments", b.addComment)
	b.mountPeople(g)
	b.mountRoutines(g)
	b.mountCosts(g)
	b.mountInbox(g)
	b.mountStatusCards(g)
	b.mountCases(g)
	b.mountPlugins(g)
	b.mountAgents(g)
	return b
}

// startTimer notes when the board received the request, for the Server-Timing header.
func startTimer(c *fiber.Ctx) error {
	c.Locals("boardStart", time.Now())
	return c.Next()
}

// render writes a component as the HTML answer with status, and the server time spent on
// the page so far (API calls included) as Server-Timing.
func render(c *fiber.Ctx, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(context.Background(), &buf); err != nil {
		return fmt.Errorf("error rendering %s: %w", c.Path(), err)
	}
	if start, ok := c.Locals("boardStart").(time.Time); ok {
		c.Set("Server-Timing", fmt.Sprintf("board;dur=%.1f", float64(time.Since(start).Microseconds())/1000))
	}
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderVary, "HX-Request, Cookie")
	return c.Send(buf.Bytes())
}

// isFragment says whether an htmx request asks for a fragment (not a history restore).
func isFragment(c *fiber.Ctx) bool {
	return c.Get("HX-Request") == "true" && c.Get("HX-History-Restore-Request") != "true"
}

// frame loads what every signed-in page shows: the actor and the companies it may see.
// ok is false when the visitor must sign in first (the answer has been written).
func (b *Board) frame(c *fiber.Ctx, title, nav, companyID string) (*layoutData, bool, error) {
	l := &layoutData{Title: title, Nav: nav, CSRF: csrfOf(c), CanSignOut: b.mode == kernel.ModeAuthenticated}
	var s session
	if err := b.api.call(c, "GET", "/api/auth/get-session", nil, nil, &s); err != nil {
		return nil, false, err
	}
	if s.User == nil {
		return nil, false, b.toSignIn(c)
	}
	l.Actor = s.User
	if err := b.api.call(c, "GET", "/api/companies", nil, nil, &l.Companies); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			return nil, false, err
		}
	}
	for i := range l.Companies {
		if l.Companies[i].ID == companyID {
			l.Current = &l.Companies[i]
		}
	}
	if companyID != "" {
		l.ExtNav = b.extensionNav(visitorOf(c), companyID)
	}
	if companyID != "" && l.Current == nil {
		// Not in the list: ask for it, which answers 403 or 404 with the API's message.
		var co company
		if err := b.api.call(c, "GET", "/api/companies/"+url.PathEscape(companyID), nil, nil, &co); err != nil {
			return l, true, err
		}
		l.Current = &co
	}
	return l, true, nil
}

// toSignIn sends the visitor to the sign-in page (htmx requests through HX-Redirect).
func (b *Board) toSignIn(c *fiber.Ctx) error {
	if c.Get("HX-Request") == "true" {
		c.Set("HX-Redirect", "/signin")
		return c.SendStatus(http.StatusUnauthorized)
	}
	return c.Redirect("/signin", http.StatusSeeOther)
}

// fail turns an error into a page: an API refusal becomes its status and a clear message,
// anything else a 500 that says what failed.
func (b *Board) fail(c *fiber.Ctx, l *layoutData, err error) error {
	var ae *apiError
	status, heading, msg := http.StatusInternalServerError, "Something went wrong", "The board could not load this page: "+err.Error()
	if errors.As(err, &ae) {
		status, msg = ae.Status, ae.Message
		switch ae.Status {
		case http.StatusUnauthorized:
			return b.toSignIn(c)
		case http.StatusForbidden:
			heading, msg = "Not allowed", "You do not have access to this: "+ae.Message+"."
		case http.StatusNotFound:
			heading = "Not found"
		default:
			heading = "The request was refused"
		}
	}
	if l == nil {
		l = &layoutData{CSRF: csrfOf(c)}
	}
	l.Title = heading
	if isFragment(c) {
		return render(c, status, templ.Raw(`<div class="notice error" role="alert">`+templ.EscapeString(msg)+`</div>`))
	}
	return render(c, status, errorPage(l, heading, msg))
}

func csrfOf(c *fiber.Ctx) string {
	s, _ := c.Locals("csrf").(string)
	return s
}

func (b *Board) home(c *fiber.Ctx) error {
	l, ok, err := b.frame(c, "Home", "", "")
	if !ok || err != nil {
		if err != nil {
			return b.fail(c, l, err)
		}
		return nil
	}
	if len(l.Companies) > 0 {
		return c.Redirect("/c/"+l.Companies[0].ID, http.StatusSeeOther)
	}
	return c.Redirect("/companies", http.StatusSeeOther)
}

func (b *Board) switchCompany(c *fiber.Ctx) error {
	id := c.Query("company")
	if id == "" || strings.ContainsAny(id, "/?#") {
		return c.Redirect("/companies", http.StatusSeeOther)
	}
	return c.Redirect("/c/"+id, http.StatusSeeOther)
}
