package kernel_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ktHeader sets one request header.
func ktHeader(name, value string) ktOpt {
	return func(r *http.Request) { r.Header.Set(name, value) }
}

// TestCrossOriginWrites covers the API's refusal of cross-origin browser writes made with
// ambient credentials (the session cookie, or none at all in local_trusted mode), while
// same-origin browser writes, non-browser clients and bearer-authenticated calls pass.
func TestCrossOriginWrites(t *testing.T) {
	t.Parallel()
	const refused = "Cross-origin request refused: send it from keel's own origin or with a bearer token"

	t.Run("LocalTrusted", func(t *testing.T) {
		t.Parallel()
		e := ktStart(t, ktLocal())
		host := strings.TrimPrefix(e.URL, "http://")
		cases := []struct {
			name   string
			method string
			opts   []ktOpt
			status int
		}{
			{"CrossSiteFetch", "POST", []ktOpt{ktHeader("Sec-Fetch-Site", "cross-site")}, http.StatusForbidden},
			{"SameSiteOtherPort", "POST", []ktOpt{ktHeader("Sec-Fetch-Site", "same-site")}, http.StatusForbidden},
			{"ForeignOriginNoFetchMetadata", "POST", []ktOpt{ktHeader("Origin", "https://evil.example")}, http.StatusForbidden},
			{"SameOrigin", "POST", []ktOpt{ktHeader("Sec-Fetch-Site", "same-origin"), ktHeader("Origin", "http://"+host)}, http.StatusCreated},
			{"UserTypedNavigation", "POST", []ktOpt{ktHeader("Sec-Fetch-Site", "none")}, http.StatusCreated},
			{"NoBrowserHeaders", "POST", nil, http.StatusCreated},
			{"CrossSiteReadIsAllowed", "GET", []ktOpt{ktHeader("Sec-Fetch-Site", "cross-site")}, http.StatusOK},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var body any
				path := "/api/companies"
				if tc.method == "POST" {
					body = map[string]any{"name": "Co " + tc.name}
				}
				r := e.Do(t, tc.method, path, body, tc.opts...)
				if tc.status == http.StatusForbidden {
					r.RequireError(t, http.StatusForbidden, refused)
					require.Equal(t, "cross_origin_refused", r.Object(t)["code"])
					return
				}
				r.RequireStatus(t, tc.status)
			})
		}
	})

	t.Run("Authenticated", func(t *testing.T) {
		t.Parallel()
		e := ktStart(t, ktAuthenticated())
		_, session := e.User(t, "Ada", true)
		e.Do(t, "POST", "/api/companies", map[string]any{"name": "Cookie cross"}, ktSession(session), ktHeader("Sec-Fetch-Site", "cross-site")).
			RequireError(t, http.StatusForbidden, refused)
		e.Do(t, "POST", "/api/companies", map[string]any{"name": "Cookie same"}, ktSession(session), ktHeader("Sec-Fetch-Site", "same-origin")).
			RequireStatus(t, http.StatusCreated)
		// A cross-site sign-in (login CSRF) is refused too.
		e.Do(t, "POST", "/api/auth/sign-in/email", map[string]any{"email": "a@b.c", "password": "x"}, ktHeader("Sec-Fetch-Site", "cross-site")).
			RequireError(t, http.StatusForbidden, refused)
	})
}
