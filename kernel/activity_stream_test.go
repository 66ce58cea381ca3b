package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/kernel"
)

// sseEvent is one server-sent event: its id and its data, the activity entry.
type sseEvent struct {
	ID    string
	Entry map[string]any
}

// sseStream is an open company event stream read event by event.
type sseStream struct {
	t    *testing.T
	resp *http.Response
	rd   *bufio.Reader
	next chan sseEvent
}

// openEvents opens the company event stream at path (with its query) and waits for the
// stream's opening comment, so entries written after it returns are the stream's to send.
func openEvents(t *testing.T, env *ktEnv, path string, header http.Header) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", env.URL+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := &sseStream{t: t, resp: resp, rd: bufio.NewReader(resp.Body), next: make(chan sseEvent, 64)}
	for {
		line, err := s.rd.ReadString('\n')
		require.NoError(t, err)
		if line == ":ok\n" {
			break
		}
	}
	go s.read()
	return s
}

func (s *sseStream) read() {
	defer close(s.next)
	var ev sseEvent
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			ev.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Entry) != nil {
				return
			}
		case line == "" && ev.ID != "":
			s.next <- ev
			ev = sseEvent{}
		}
	}
}

// Expect reads the next n events and returns them.
func (s *sseStream) Expect(n int) []sseEvent {
	s.t.Helper()
	out := []sseEvent{}
	deadline := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-s.next:
			require.True(s.t, ok, "the stream ended after %d of %d events", len(out), n)
			out = append(out, ev)
		case <-deadline:
			s.t.Fatalf("only %d of %d events arrived", len(out), n)
		}
	}
	return out
}

func entityIDs(evs []sseEvent) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.Entry["entityId"].(string))
	}
	return out
}

func TestCompanyEventStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := ktStart(t, ktLocal())
	company := env.Company(t, map[string]any{"name": "Stream Co"})["id"].(string)
	other := env.Company(t, map[string]any{"name": "Elsewhere"})["id"].(string)
	write := func(companyID, entityType, entityID string) string {
		t.Helper()
		e, err := env.K.ActivityInsert(ctx, &kernel.ActivityInsertParams{CompanyID: companyID, Action: entityType + ".updated",
			EntityType: entityType, EntityID: entityID})
		require.NoError(t, err)
		return e.ID
	}
	events := "/api/companies/" + company + "/events"

	t.Run("LiveInOrderAndOnlyThisCompany", func(t *testing.T) {
		write(company, "issue", "before-open")
		s := openEvents(t, env, events, nil)
		write(other, "issue", "other-company")
		id1 := write(company, "issue", "A")
		write(company, "project", "B")
		got := s.Expect(2)
		require.Equal(t, []string{"A", "B"}, entityIDs(got), "nothing from before the stream opened or from another company")
		require.Equal(t, id1, got[0].ID, "the event id is the entry id")
		require.Equal(t, company, got[0].Entry["companyId"])
		require.Equal(t, "issue.updated", got[0].Entry["action"])
	})

	t.Run("Filters", func(t *testing.T) {
		s := openEvents(t, env, events+"?entityType=project", nil)
		write(company, "issue", "skipped")
		write(company, "project", "P1")
		require.Equal(t, []string{"P1"}, entityIDs(s.Expect(1)))
	})

	t.Run("ResumeAfterLastEventID", func(t *testing.T) {
		first := write(company, "goal", "G1")
		write(company, "goal", "G2")
		write(company, "goal", "G3")
		h := http.Header{}
		h.Set("Last-Event-ID", first)
		s := openEvents(t, env, events+"?entityType=goal", h)
		require.Equal(t, []string{"G2", "G3"}, entityIDs(s.Expect(2)))
		write(company, "goal", "G4")
		require.Equal(t, []string{"G4"}, entityIDs(s.Expect(1)))

		q := openEvents(t, env, events+"?entityType=goal&lastEventId="+first, nil)
		require.Equal(t, []string{"G2", "G3", "G4"}, entityIDs(q.Expect(3)))
	})

	t.Run("StartAtSince", func(t *testing.T) {
		// A page read its data, then an entry was written, then the page opened its stream
		// with since = the moment it read (less a margin): the entry is not missed, and
		// entries from before since are not sent.
		_, err := env.K.Pool.Exec(ctx, `INSERT INTO kernel.activity_log (id, company_id, actor_type, actor_id, action, entity_type, entity_id, created_at)
			VALUES (gen_random_uuid(), $1, 'system', '', 'since.updated', 'since', 'old', now() - interval '1 minute')`, company)
		require.NoError(t, err)
		since := time.Now().Add(-10 * time.Second).UTC().Format(time.RFC3339Nano)
		write(company, "since", "S1")
		s := openEvents(t, env, events+"?entityType=since&since="+since, nil)
		require.Equal(t, []string{"S1"}, entityIDs(s.Expect(1)))
		write(company, "since", "S2")
		require.Equal(t, []string{"S2"}, entityIDs(s.Expect(1)))
	})

	t.Run("LateCommitSentOnce", func(t *testing.T) {
		s := openEvents(t, env, events+"?entityType=late", nil)
		write(company, "late", "L1")
		require.Equal(t, []string{"L1"}, entityIDs(s.Expect(1)))
		// An entry whose transaction started before L1's but committed after it.
		_, err := env.K.Pool.Exec(ctx, `INSERT INTO kernel.activity_log (id, company_id, actor_type, actor_id, action, entity_type, entity_id, created_at)
			VALUES (gen_random_uuid(), $1, 'system', '', 'late.updated', 'late', 'L0', now() - interval '500 milliseconds')`, company)
		require.NoError(t, err)
		write(company, "late", "L2")
		require.Equal(t, []string{"L0", "L2"}, entityIDs(s.Expect(2)), "the late entry arrives, and L1 is not sent again")
	})

	t.Run("OutlivesItsRequestBuffers", func(t *testing.T) {
		// The server reuses request buffers once a handler returns; the stream keeps copies.
		s := openEvents(t, env, events+"?entityType=buffered", nil)
		for range 50 {
			env.Do(t, "GET", "/api/companies/"+other+"/activity?entityType=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", nil).
				RequireStatus(t, http.StatusOK)
		}
		write(company, "buffered", "B1")
		require.Equal(t, []string{"B1"}, entityIDs(s.Expect(1)))
	})

	t.Run("WrittenOnAnotherNode", func(t *testing.T) {
		second := ktServe(t, env.DSN, ktLocal())
		s := openEvents(t, env, events+"?entityType=remote", nil)
		_, err := second.K.ActivityInsert(ctx, &kernel.ActivityInsertParams{CompanyID: company, Action: "remote.updated",
			EntityType: "remote", EntityID: "R1"})
		require.NoError(t, err)
		require.Equal(t, []string{"R1"}, entityIDs(s.Expect(1)))
	})

	t.Run("BadInput", func(t *testing.T) {
		for _, tc := range []struct {
			name, query, header, path string
		}{
			{"CursorNotUUID", "?lastEventId=nope", "", "Last-Event-ID"},
			{"HeaderNotUUID", "", "12", "Last-Event-ID"},
			{"UnknownCursor", "?lastEventId=00000000-0000-7000-8000-000000000000", "", "Last-Event-ID"},
			{"AgentNotUUID", "?agentId=x", "", "agentId"},
			{"SinceNotATime", "?since=yesterday", "", "since"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var opts []ktOpt
				if tc.header != "" {
					opts = append(opts, func(r *http.Request) { r.Header.Set("Last-Event-ID", tc.header) })
				}
				env.Do(t, "GET", events+tc.query, nil, opts...).RequireValidation(t, tc.path)
			})
		}
		// Another company's entry is not a cursor here.
		foreign := write(other, "issue", "foreign")
		env.Do(t, "GET", events+"?lastEventId="+foreign, nil).RequireValidation(t, "Last-Event-ID")
	})
}

func TestCompanyEventStreamAccess(t *testing.T) {
	t.Parallel()
	env := ktStart(t, ktAuthenticated())
	owner, session := env.User(t, "Owner", true)
	_ = owner
	company := env.Company(t, map[string]any{"name": "Guarded"}, ktSession(session))["id"].(string)
	other := env.Company(t, map[string]any{"name": "Neighbour"}, ktSession(session))["id"].(string)
	_, otherKey := env.Agent(t, other, "Outsider")
	_, ownKey := env.Agent(t, company, "Insider")
	events := "/api/companies/" + company + "/events"

	env.Do(t, "GET", events, nil).RequireStatus(t, http.StatusUnauthorized)
	env.Do(t, "GET", events, nil, ktBearer(otherKey)).RequireStatus(t, http.StatusForbidden)
	outsider, outsiderSession := env.User(t, "Stranger", false)
	_ = outsider
	env.Do(t, "GET", events, nil, ktSession(outsiderSession)).RequireStatus(t, http.StatusForbidden)

	// The company's own agent and a member board user may listen.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, auth := range []ktOpt{ktBearer(ownKey), ktSession(session)} {
		req, err := http.NewRequestWithContext(ctx, "GET", env.URL+events, nil)
		require.NoError(t, err)
		auth(req)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp.Body.Close()
	}
}
