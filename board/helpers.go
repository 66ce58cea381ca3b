package board

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/a-h/templ"
)

func itoa(n int) string { return strconv.Itoa(n) }

// current is the aria-current value of a navigation link.
func current(nav, name string) string {
	if nav == name {
		return "page"
	}
	return "false"
}

func agentNames(agents []agent) map[string]string {
	m := make(map[string]string, len(agents))
	for _, a := range agents {
		m[a.ID] = a.Name
	}
	return m
}

func assigneeName(is issue, names map[string]string) string {
	switch {
	case is.AssigneeAgentID != nil:
		if n := names[*is.AssigneeAgentID]; n != "" {
			return n
		}
		return "agent " + shortID(*is.AssigneeAgentID)
	case is.AssigneeUserID != nil:
		return "user " + *is.AssigneeUserID
	}
	return "—"
}

func commentAuthor(c comment, names map[string]string) string {
	switch {
	case c.AuthorAgentID != nil:
		if n := names[*c.AuthorAgentID]; n != "" {
			return n
		}
		return "agent " + shortID(*c.AuthorAgentID)
	case c.AuthorUserID != nil:
		return "user " + *c.AuthorUserID
	}
	return c.AuthorType
}

func documentTitle(d document) string {
	if d.Title != nil && *d.Title != "" {
		return *d.Title
	}
	return d.Key
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func pageSummary(d *issueListData) string {
	if len(d.Issues) == 0 {
		return fmt.Sprintf("%d issues", d.Total)
	}
	return fmt.Sprintf("%d–%d of %d", d.Filters.Offset+1, d.Filters.Offset+len(d.Issues), d.Total)
}

// templJoin renders components one after the other.
func templJoin(cs ...templ.Component) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		for _, c := range cs {
			if err := c.Render(ctx, w); err != nil {
				return err
			}
		}
		return nil
	})
}

// liveEvents is the URL of the company event stream a page follows, filtered by query. It
// starts ten seconds before the page was rendered (since), so an entry written between the
// page reading its data and its browser opening the stream still refreshes the page; an
// entry the page already shows only costs one extra fetch of its fragment.
func liveEvents(companyID, query string) string {
	u := "/api/companies/" + companyID + "/events?"
	if query != "" {
		u += query + "&"
	}
	return u + "since=" + url.QueryEscape(time.Now().Add(-10*time.Second).UTC().Format(time.RFC3339Nano))
}
