package board

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/kernel"
)

// ContentSecurityPolicy is sent with every board response: scripts and styles only from the
// board's own origin (no inline script, no style attributes), live updates only from the
// same origin, and no framing.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// CSRF names: the browser cookie the token is bound to, the form field and the header that
// carry the token back.
const (
	csrfCookie = "keel_csrf"
	csrfField  = "_csrf"
	csrfHeader = "X-CSRF-Token"
)

// securityHeaders sets the board's response headers.
func securityHeaders(c *fiber.Ctx) error {
	c.Set("Content-Security-Policy", ContentSecurityPolicy)
	c.Set("X-Frame-Options", "DENY")
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("Referrer-Policy", "same-origin")
	return c.Next()
}

// csrfGuard issues the per-browser CSRF cookie and the page's token on safe requests, and
// refuses unsafe requests that are cross-origin (Sec-Fetch-Site/Origin, as
// net/http.CrossOriginProtection judges them) or carry no valid token. The token is an
// HMAC over the session cookie and the per-browser cookie, so it is tied to the session:
// signing in again or in another browser makes old tokens invalid.
type csrfGuard struct {
	key    []byte
	secure bool
	cop    *http.CrossOriginProtection
}

func newCSRFGuard(secret []byte, secure bool) *csrfGuard {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("keel board csrf"))
	return &csrfGuard{key: m.Sum(nil), secure: secure, cop: http.NewCrossOriginProtection()}
}

// token returns the CSRF token of the visitor's session and browser cookie.
func (g *csrfGuard) token(session, browser string) string {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte(session))
	m.Write([]byte{0})
	m.Write([]byte(browser))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// handle is the middleware: it stores the page's token in Locals("csrf").
func (g *csrfGuard) handle(c *fiber.Ctx) error {
	browser := c.Cookies(csrfCookie)
	if browser == "" {
		if !safeMethod(c.Method()) {
			return refuse(c, "This form has expired: reload the page and try again.")
		}
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		browser = base64.RawURLEncoding.EncodeToString(b)
		c.Cookie(&fiber.Cookie{Name: csrfCookie, Value: browser, Path: "/", HTTPOnly: true,
			SameSite: fiber.CookieSameSiteLaxMode, Secure: g.secure})
	}
	want := g.token(c.Cookies(kernel.SessionCookie), browser)
	c.Locals("csrf", want)
	if safeMethod(c.Method()) {
		return c.Next()
	}
	if err := g.cop.Check(crossOriginRequest(c)); err != nil {
		return refuse(c, "Cross-origin request refused.")
	}
	got := c.Get(csrfHeader)
	if got == "" {
		got = c.FormValue(csrfField)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return refuse(c, "This form has expired: reload the page and try again.")
	}
	return c.Next()
}

// crossOriginRequest is the part of a Fiber request net/http.CrossOriginProtection reads.
func crossOriginRequest(c *fiber.Ctx) *http.Request {
	h := http.Header{}
	for _, name := range []string{"Sec-Fetch-Site", "Origin"} {
		if v := c.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	return &http.Request{Method: c.Method(), Header: h, Host: string(c.Request().Host())}
}

func safeMethod(m string) bool {
	return m == fiber.MethodGet || m == fiber.MethodHead || m == fiber.MethodOptions
}

// refuse answers a refused unsafe request with 403 and a plain message.
func refuse(c *fiber.Ctx, msg string) error {
	c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
	return c.Status(fiber.StatusForbidden).SendString(msg)
}
