package statuscards_test

import (
	"net/http"
	"testing"

	"github.com/keelhq/keel/extensions/statuscards"
)

// TestFlagTurnsRoutesOffAndOn turns enableStatusCards on and off at runtime: every route is
// 404 "Status cards are not enabled" while it is off, and works again once it is back on,
// without a restart.
func TestFlagTurnsRoutesOffAndOn(t *testing.T) {
	t.Parallel()
	h := startHost(t, false)
	co := h.CreateCompany("Flag Co")
	paths := []struct{ method, path string }{
		{"GET", "/api/companies/" + co + "/status-cards"},
		{"POST", "/api/companies/" + co + "/status-cards"},
		{"GET", "/api/status-cards/00000000-0000-0000-0000-000000000001"},
		{"POST", "/api/status-cards/00000000-0000-0000-0000-000000000001/refresh"},
		{"GET", "/api/status-cards/00000000-0000-0000-0000-000000000001/dry-run"},
	}
	off := func() {
		for _, p := range paths {
			wantErr(t, h.Do(p.method, p.path, map[string]any{"interestPrompt": "x"}), http.StatusNotFound, "Status cards are not enabled")
		}
	}
	off()
	setFlag(t, h, true)
	waitStatus(t, h, statuscards.Key, "ready")
	list(t, h.Do("GET", "/api/companies/"+co+"/status-cards", nil))
	wantErr(t, h.Do("GET", "/api/status-cards/00000000-0000-0000-0000-000000000001", nil), http.StatusNotFound, "Status card not found")
	setFlag(t, h, false)
	waitStatus(t, h, statuscards.Key, "disabled")
	off()
	setFlag(t, h, true)
	waitStatus(t, h, statuscards.Key, "ready")
	list(t, h.Do("GET", "/api/companies/"+co+"/status-cards", nil))
}
