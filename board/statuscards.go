package board

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// The status cards page: a company's cards with their summaries, and forms to create,
// edit, archive, refresh and delete them. Status cards are experimental: while the
// instance flag enableStatusCards is off the API answers 404 "Status cards are not
// enabled", which the page shows as a notice.

// statusCardsOff is the API's answer while the flag is off.
const statusCardsOff = "Status cards are not enabled"

// mountStatusCards adds the status card pages.
func (b *Board) mountStatusCards(g fiber.Router) {
	g.Get("/c/:companyId/status-cards", b.statusCards)
	g.Post("/c/:companyId/status-cards", b.createStatusCard)
	g.Post("/c/:companyId/status-cards/:cardId", b.editStatusCard)
	g.Post("/c/:companyId/status-cards/:cardId/archive", b.archiveStatusCard)
	g.Post("/c/:companyId/status-cards/:cardId/refresh", b.refreshStatusCard)
	g.Post("/c/:companyId/status-cards/:cardId/delete", b.deleteStatusCard)
}

// statusCardsData is the status cards page.
type statusCardsData struct {
	CompanyID string
	CSRF      string
	Cards     []statusCard
	Agents    []agent
	AgentName map[string]string
	Archived  bool
	// Off is true while the instance flag is off.
	Off    bool
	Notice string
	Error  string
}

// loadStatusCards reads the cards and the company's agents; the flag being off is Off, not
// an error.
func (b *Board) loadStatusCards(c *fiber.Ctx, archived bool) (*statusCardsData, error) {
	id := c.Params("companyId")
	d := &statusCardsData{CompanyID: id, CSRF: csrfOf(c), Archived: archived}
	v := visitorOf(c)
	co := "/api/companies/" + url.PathEscape(id)
	var listErr error
	var g errgroup.Group
	g.Go(func() error {
		q := url.Values{}
		if archived {
			q.Set("archived", "true")
		}
		listErr = b.api.callAs(v, "GET", co+"/status-cards", q, nil, &d.Cards)
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", co+"/agents", nil, nil, &d.Agents)
		return nil
	})
	_ = g.Wait()
	var ae *apiError
	if errors.As(listErr, &ae) && ae.Status == http.StatusNotFound && ae.Message == statusCardsOff {
		d.Off, d.Cards = true, nil
		return d, nil
	}
	if listErr != nil {
		return nil, listErr
	}
	d.AgentName = agentNames(d.Agents)
	return d, nil
}

func (b *Board) statusCards(c *fiber.Ctx) error { return b.renderStatusCards(c, nil, "") }

// renderStatusCards shows the page; refusal, when set, is a write the API refused.
func (b *Board) renderStatusCards(c *fiber.Ctx, refusal *apiError, notice string) error {
	l, done, err := b.page(c, "Status cards", "status-cards", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadStatusCards(c, c.Query("archived") == "true")
	if err != nil {
		return b.fail(c, l, err)
	}
	d.Notice = notice
	status := http.StatusOK
	if refusal != nil {
		status, d.Error = refusal.Status, refusalText(refusal)
	}
	return render(c, status, statusCardsPage(l, d))
}

// cardsAfterWrite answers a status card form: back to the page, or the page with the
// refusal and the API's status.
func (b *Board) cardsAfterWrite(c *fiber.Ctx, writeErr error) error {
	var ae *apiError
	if writeErr != nil && !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	if writeErr == nil {
		back := "/c/" + c.Params("companyId") + "/status-cards"
		if c.FormValue("archived") == "true" {
			back += "?archived=true"
		}
		return c.Redirect(back, http.StatusSeeOther)
	}
	if ae.Status == http.StatusUnauthorized {
		return b.toSignIn(c)
	}
	return b.renderStatusCards(c, ae, "")
}

func (b *Board) createStatusCard(c *fiber.Ctx) error {
	body := map[string]any{"interestPrompt": c.FormValue("interestPrompt")}
	if t := strings.TrimSpace(c.FormValue("title")); t != "" {
		body["title"], body["titlePinned"] = t, true
	}
	if a := c.FormValue("agentId"); a != "" {
		body["agentId"] = a
	}
	err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(c.Params("companyId"))+"/status-cards", nil, body, nil)
	return b.cardsAfterWrite(c, err)
}

// editStatusCard changes the title (empty: the compiler's) and the interest prompt (a
// change recompiles the card).
func (b *Board) editStatusCard(c *fiber.Ctx) error {
	var card statusCard
	path := "/api/status-cards/" + url.PathEscape(c.Params("cardId"))
	if err := b.api.call(c, "GET", path, nil, nil, &card); err != nil {
		return b.cardsAfterWrite(c, err)
	}
	patch := map[string]any{}
	title := strings.TrimSpace(c.FormValue("title"))
	switch {
	case title == "" && card.TitlePinned:
		patch["title"], patch["titlePinned"] = nil, false
	case title != "" && (card.Title == nil || *card.Title != title || !card.TitlePinned):
		patch["title"], patch["titlePinned"] = title, true
	}
	if p := c.FormValue("interestPrompt"); strings.TrimSpace(p) != strings.TrimSpace(card.InterestPrompt) {
		patch["interestPrompt"] = p
	}
	if len(patch) == 0 {
		return b.cardsAfterWrite(c, nil)
	}
	return b.cardsAfterWrite(c, b.api.call(c, "PATCH", path, nil, patch, nil))
}

func (b *Board) archiveStatusCard(c *fiber.Ctx) error {
	archive := c.FormValue("archive") != "false"
	err := b.api.call(c, "PATCH", "/api/status-cards/"+url.PathEscape(c.Params("cardId")), nil, map[string]any{"archived": archive}, nil)
	return b.cardsAfterWrite(c, err)
}

func (b *Board) refreshStatusCard(c *fiber.Ctx) error {
	err := b.api.call(c, "POST", "/api/status-cards/"+url.PathEscape(c.Params("cardId"))+"/refresh", nil, map[string]any{}, nil)
	return b.cardsAfterWrite(c, err)
}

func (b *Board) deleteStatusCard(c *fiber.Ctx) error {
	err := b.api.call(c, "DELETE", "/api/status-cards/"+url.PathEscape(c.Params("cardId")), nil, nil, nil)
	return b.cardsAfterWrite(c, err)
}

// cardTitle is a card's title, or a placeholder before the compiler names it.
func cardTitle(s *statusCard) string {
	if s.Title != nil && *s.Title != "" {
		return *s.Title
	}
	return "Untitled card"
}

// cardFreshness is how the board shows a card's state: an active card is fresh, stale or
// updating (spec part 1 "Status card state").
func cardFreshness(s *statusCard) string {
	if s.ArchivedAt != nil {
		return "archived"
	}
	if s.State != "active" {
		return s.State
	}
	switch {
	case s.GeneratingIssueID != nil:
		return "updating"
	case s.PendingChangeCount > 0:
		return "stale"
	}
	return "fresh"
}

// cardAuthor names who created a card.
func cardAuthor(s *statusCard, names map[string]string) string {
	switch {
	case s.CreatedByAgentID != nil:
		return agentLabel(*s.CreatedByAgentID, names)
	case s.CreatedByUserID != nil:
		return "user " + *s.CreatedByUserID
	}
	return "—"
}

func cardTitleValue(s *statusCard) string {
	if s.TitlePinned && s.Title != nil {
		return *s.Title
	}
	return ""
}
