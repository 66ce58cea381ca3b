package kernel

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
)

// crossOrigin refuses browser requests that change state from another origin. A browser
// sends the session cookie (authenticated mode) with a cross-site request, and in
// local_trusted mode a request with no credentials at all is the local board, so a page on
// any other site could otherwise post to the API as the board user. Requests carrying a
// bearer token are not ambient credentials and are never refused here; neither are requests
// without Sec-Fetch-Site and Origin (the CLI, SDK clients, webhook senders) nor same-origin
// ones, exactly as net/http.CrossOriginProtection judges them.
var crossOrigin = http.NewCrossOriginProtection()

// checkCrossOrigin returns the 403 for a cross-origin unsafe request authenticated by
// ambient credentials (no Authorization header), or nil.
func checkCrossOrigin(c *fiber.Ctx) *APIError {
	if !IsWriteMethod(c.Method()) {
		return nil
	}
	if _, hasBearer := bearerToken(c.Get(fiber.HeaderAuthorization)); hasBearer {
		return nil
	}
	h := http.Header{}
	for _, name := range []string{"Sec-Fetch-Site", "Origin"} {
		if v := c.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	if err := crossOrigin.Check(&http.Request{Method: c.Method(), Header: h, Host: string(c.Request().Host())}); err != nil {
		return Forbidden("Cross-origin request refused: send it from keel's own origin or with a bearer token").WithCode("cross_origin_refused")
	}
	return nil
}
