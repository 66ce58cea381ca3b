package board_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// testStatusCards creates, edits, archives, restores and deletes a card through the page's
// forms (with the flag on; TestBoardBinboxFlagsOff covers the flag off).
func testStatusCards(t *testing.T, h *sdktest.Host) {
	co := h.CreateCompany("Cards Co")
	summarizer := h.CreateAgent(co, "Cards Summarizer", "general")
	b := newBrowser(t, h.URL)
	page := "/c/" + co + "/status-cards"
	p := b.get(page)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireSafePage(t, p)
	require.Contains(t, p.Body, "No status cards yet.")
	require.Contains(t, p.Body, `name="interestPrompt"`)
	require.Contains(t, p.Body, "Cards Summarizer")
	tok := p.csrf(t)

	p = b.post(page, url.Values{"_csrf": {tok}, "interestPrompt": {"Is the launch on track?"}, "title": {"Launch watch"}, "agentId": {summarizer.ID}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	var cards []map[string]any
	h.Do("GET", "/api/companies/"+co+"/status-cards", nil).JSON(t, &cards)
	require.Len(t, cards, 1)
	id := cards[0]["id"].(string)
	require.Equal(t, "Launch watch", cards[0]["title"])
	p = b.get(page)
	require.Contains(t, p.Body, "Launch watch")
	require.Contains(t, p.Body, "Is the launch on track?")
	require.Contains(t, p.Body, `id="card-`+id+`"`)

	// A refused create shows the API's message on the page, with its status.
	p = b.post(page, url.Values{"_csrf": {tok}, "interestPrompt": {"   "}})
	require.Equal(t, http.StatusBadRequest, p.Status, p.Body)
	require.Contains(t, p.Body, "The change was refused")

	// Edit the title.
	p = b.post(page+"/"+id, url.Values{"_csrf": {tok}, "title": {"Launch radar"}, "interestPrompt": {"Is the launch on track?"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "Launch radar", h.Do("GET", "/api/status-cards/"+id, nil).Map(t)["title"])
	// Archive, see it under the archived cards, restore.
	p = b.post(page+"/"+id+"/archive", url.Values{"_csrf": {tok}, "archive": {"true"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.NotContains(t, b.get(page).Body, "Launch radar")
	require.Contains(t, b.get(page+"?archived=true").Body, "Launch radar")
	p = b.post(page+"/"+id+"/archive", url.Values{"_csrf": {tok}, "archive": {"false"}, "archived": {"true"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, page+"?archived=true", p.Header.Get("Location"))
	// Delete; a write without the CSRF token is refused first.
	p = b.post(page+"/"+id+"/delete", url.Values{})
	require.Equal(t, http.StatusForbidden, p.Status, p.Body)
	p = b.post(page+"/"+id+"/delete", url.Values{"_csrf": {tok}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, http.StatusNotFound, h.Do("GET", "/api/status-cards/"+id, nil).Status)
	// A card that is gone: the page says so.
	p = b.post(page+"/"+id+"/delete", url.Values{"_csrf": {tok}})
	require.Equal(t, http.StatusNotFound, p.Status, p.Body)
	requireSafePage(t, p)
}
