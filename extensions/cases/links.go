package cases

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addRoutes(
		route{Method: http.MethodPost, Path: "/api/cases/{id}/links", Status: http.StatusCreated, Response: new(IssueLink),
			Summary: "Link an issue to a case as origin, work or reference (re-posting the pair returns the existing link)",
			Body:    LinkCreateBody{}, Handle: (*Cases).handleLinkCreate},
		route{Method: http.MethodDelete, Path: "/api/cases/{id}/links/{linkId}", Response: new(map[string]bool),
			Summary: "Remove an issue link from a case (records issue_unlinked)", Handle: (*Cases).handleLinkDelete},
		route{Method: http.MethodGet, Path: "/api/issues/{issueId}/cases", Response: new([]IssueCase),
			Summary: "List the cases an issue (UUID or identifier) is linked to, with the link's role", Handle: (*Cases).handleIssueCases},
	)
}

// LinkCreateBody is the body of POST /api/cases/{id}/links.
type LinkCreateBody struct {
	IssueID string `json:"issueId" jsonschema:"format=uuid"`
	Role    string `json:"role" jsonschema:"enum=origin,enum=work,enum=reference"`
}

func (x *Cases) handleLinkCreate(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body LinkCreateBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []detail
	body.IssueID = strings.ToLower(strings.TrimSpace(body.IssueID))
	if !isUUID(body.IssueID) {
		d = append(d, detail{Path: "issueId", Message: "must be a UUID"})
	}
	if !linkRoles[body.Role] {
		d = append(d, detail{Path: "role", Message: "must be origin, work or reference"})
	}
	if err := validation(d); err != nil {
		x.writeErr(rw, err)
		return
	}
	c, err := x.caseByRef(ctx, x.pool, r.PathValue("id"), false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	iss, err := x.issueInCompany(ctx, c.CompanyID, body.IssueID)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	at := attributionOf(sdk.ActorFrom(ctx))
	var l *IssueLink
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		l, err = linkTx(ctx, tx, c, body.IssueID, body.Role, at, false)
		return err
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	l.Issue = iss
	sdk.WriteJSON(rw, http.StatusCreated, l)
}

func (x *Cases) handleLinkDelete(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := x.caseByRef(ctx, x.pool, r.PathValue("id"), false)
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	linkID := strings.ToLower(r.PathValue("linkId"))
	if !isUUID(linkID) {
		x.writeErr(rw, notFound(msgLinkNotFound))
		return
	}
	at := attributionOf(sdk.ActorFrom(ctx))
	err = x.inTx(ctx, func(tx pgx.Tx) error {
		l, err := scanLink(tx.QueryRow(ctx, `DELETE FROM case_issue_links WHERE id = $1 AND case_id = $2 RETURNING `+linkCols, linkID, c.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(msgLinkNotFound)
		}
		if err != nil {
			return fmt.Errorf("error removing link %s: %w", linkID, err)
		}
		return eventTx(ctx, tx, c.CompanyID, c.ID, "issue_unlinked", at, l.IssueID,
			map[string]any{"role": l.Role, "issueId": l.IssueID, "linkId": l.ID})
	})
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	sdk.WriteJSON(rw, http.StatusOK, map[string]bool{"ok": true})
}

// caseLinks reads a case's issue links, oldest first, each with its compact issue.
func (x *Cases) caseLinks(ctx context.Context, c *Case) ([]*IssueLink, error) {
	rows, err := x.pool.Query(ctx, `SELECT `+linkCols+` FROM case_issue_links WHERE case_id = $1 ORDER BY created_at, id`, c.ID)
	if err != nil {
		return nil, fmt.Errorf("error reading links of case %s: %w", c.ID, err)
	}
	links, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*IssueLink, error) { return scanLink(row) })
	if err != nil {
		return nil, fmt.Errorf("error reading links of case %s: %w", c.ID, err)
	}
	ids := make([]string, 0, len(links))
	for _, l := range links {
		ids = append(ids, l.IssueID)
	}
	issues := x.issueSummaries(ctx, c.CompanyID, ids)
	for _, l := range links {
		l.Issue = issues[l.IssueID]
	}
	if links == nil {
		links = []*IssueLink{}
	}
	return links, nil
}

// IssueCase is one entry of GET /api/issues/{issueId}/cases.
type IssueCase struct {
	ID        string       `json:"id"`
	Role      string       `json:"role"`
	CreatedAt time.Time    `json:"createdAt"`
	Case      *CaseSummary `json:"case"`
}

func (x *Cases) handleIssueCases(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	iss, err := x.resolveIssue(ctx, r.PathValue("issueId"))
	if err != nil {
		x.writeErr(rw, err)
		return
	}
	rows, err := x.pool.Query(ctx, `SELECT l.id, l.role, l.created_at, c.id, c.identifier, c.title, c.case_type, c.status
		FROM case_issue_links l JOIN cases c ON c.id = l.case_id
		WHERE l.issue_id = $1 AND l.company_id = $2 ORDER BY l.created_at DESC, l.id DESC`, iss.ID, iss.CompanyID)
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing cases of issue %s: %w", iss.ID, err))
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (IssueCase, error) {
		ic := IssueCase{Case: new(CaseSummary)}
		err := row.Scan(&ic.ID, &ic.Role, &ic.CreatedAt, &ic.Case.ID, &ic.Case.Identifier, &ic.Case.Title, &ic.Case.CaseType, &ic.Case.Status)
		return ic, err
	})
	if err != nil {
		x.writeErr(rw, fmt.Errorf("error listing cases of issue %s: %w", iss.ID, err))
		return
	}
	if out == nil {
		out = []IssueCase{}
	}
	sdk.WriteJSON(rw, http.StatusOK, out)
}
