package board

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/keelhq/keel/kernel"
)

// signInForm shows the sign-in page in authenticated mode; in local_trusted mode every
// browser on the machine is the local board, so it goes home.
func (b *Board) signInForm(c *fiber.Ctx) error {
	if b.mode != kernel.ModeAuthenticated {
		return c.Redirect("/", http.StatusSeeOther)
	}
	return render(c, http.StatusOK, signInPage(csrfOf(c), "", "", b.bootstrapPending(c)))
}

func (b *Board) bootstrapPending(c *fiber.Ctx) bool {
	var h health
	return b.api.call(c, "GET", "/api/health", nil, nil, &h) == nil && h.BootstrapStatus == "bootstrap_pending"
}

// signIn signs in through the API and passes its session cookie on. A new session makes a
// new CSRF token (the token is bound to the session cookie), which the next page carries.
func (b *Board) signIn(c *fiber.Ctx) error {
	email := c.FormValue("email")
	err := b.api.callSettingCookies(c, "POST", "/api/auth/sign-in/email",
		map[string]any{"email": email, "password": c.FormValue("password")}, nil)
	if err != nil {
		return b.signInFailed(c, email, err)
	}
	return c.Redirect("/", http.StatusSeeOther)
}

// signUp creates an account through the API (the first one, while no admin exists).
func (b *Board) signUp(c *fiber.Ctx) error {
	email := c.FormValue("email")
	err := b.api.callSettingCookies(c, "POST", "/api/auth/sign-up/email",
		map[string]any{"name": c.FormValue("name"), "email": email, "password": c.FormValue("password")}, nil)
	if err != nil {
		return b.signInFailed(c, email, err)
	}
	return c.Redirect("/companies", http.StatusSeeOther)
}

func (b *Board) signInFailed(c *fiber.Ctx, email string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	return render(c, ae.Status, signInPage(csrfOf(c), email, ae.Message, b.bootstrapPending(c)))
}

// signOut ends the session through the API, which clears the cookie.
func (b *Board) signOut(c *fiber.Ctx) error {
	if err := b.api.callSettingCookies(c, "POST", "/api/auth/sign-out", map[string]any{}, nil); err != nil {
		return b.fail(c, nil, err)
	}
	return c.Redirect("/signin", http.StatusSeeOther)
}

// claimAdmin claims the first instance admin for the signed-in session.
func (b *Board) claimAdmin(c *fiber.Ctx) error {
	if err := b.api.call(c, "POST", "/api/bootstrap/claim", nil, map[string]any{}, nil); err != nil {
		l, _, _ := b.frame(c, "Companies", "companies", "")
		return b.fail(c, l, err)
	}
	return c.Redirect("/companies", http.StatusSeeOther)
}
