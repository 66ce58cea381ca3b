package costs

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSpendByDay reports cost events on a few days and reads them back per UTC day: every
// day of the range listed oldest first, days without spend as zeros, the agent and project
// filters, the default range and the refusals.
func TestSpendByDay(t *testing.T) {
	t.Parallel()
	h := startHost(t)
	company := h.CreateCompany("Daily Co")
	a := createAgent(t, h, company, "Day Worker")
	b := createAgent(t, h, company, "Night Worker")
	project := obj(t, do(t, h, http.StatusCreated, "POST", "/api/companies/"+company+"/projects", map[string]any{"name": "Daily Project"}))["id"].(string)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := func(n int) time.Time { return today.AddDate(0, 0, n) }
	for _, e := range []struct {
		agent   string
		at      time.Time
		cents   int
		in      int
		project string
	}{
		{a, day(0).Add(time.Minute), 5, 10, ""},
		{b, day(0).Add(2 * time.Minute), 7, 1, project},
		{a, day(-2).Add(23*time.Hour + 59*time.Minute), 11, 0, ""},
		{a, day(-3), 13, 3, ""},
		{a, day(-40), 17, 0, ""},
	} {
		body := map[string]any{"agentId": e.agent, "provider": "anthropic", "model": "m1", "costCents": e.cents,
			"inputTokens": e.in, "occurredAt": iso(e.at)}
		if e.project != "" {
			body["projectId"] = e.project
		}
		postCost(t, h, company, body)
	}
	path := "/api/companies/" + company + "/costs/by-day"
	date := func(n int) string { return day(n).Format(time.DateOnly) }

	t.Run("Range", func(t *testing.T) {
		t.Parallel()
		days := list(t, do(t, h, http.StatusOK, "GET", path+"?from="+date(-3)+"&to="+date(0), nil))
		require.Len(t, days, 4)
		want := []struct {
			date       string
			cents, in  int64
			eventCount int64
		}{{date(-3), 13, 3, 1}, {date(-2), 11, 0, 1}, {date(-1), 0, 0, 0}, {date(0), 12, 11, 2}}
		for i, w := range want {
			require.Equal(t, w.date, days[i]["date"], "day %d", i)
			require.Equal(t, w.cents, num(days[i]["costCents"]), "day %s", w.date)
			require.Equal(t, w.in, num(days[i]["inputTokens"]), "day %s", w.date)
			require.Equal(t, w.eventCount, num(days[i]["eventCount"]), "day %s", w.date)
		}
		// A date-time means its UTC day.
		days = list(t, do(t, h, http.StatusOK, "GET", path+"?from="+iso(day(-2).Add(5*time.Hour))+"&to="+iso(day(-2).Add(6*time.Hour)), nil))
		require.Len(t, days, 1)
		require.EqualValues(t, 11, num(days[0]["costCents"]))
	})

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		days := list(t, do(t, h, http.StatusOK, "GET", path+"?from="+date(0)+"&to="+date(0)+"&agentId="+b, nil))
		require.Len(t, days, 1)
		require.EqualValues(t, 7, num(days[0]["costCents"]))
		days = list(t, do(t, h, http.StatusOK, "GET", path+"?from="+date(-3)+"&projectId="+project, nil))
		require.Len(t, days, 4)
		var sum int64
		for _, d := range days {
			sum += num(d["costCents"])
		}
		require.EqualValues(t, 7, sum)
	})

	t.Run("DefaultIsThirtyDaysToToday", func(t *testing.T) {
		t.Parallel()
		days := list(t, do(t, h, http.StatusOK, "GET", path, nil))
		require.Len(t, days, 30)
		require.Equal(t, date(-29), days[0]["date"])
		require.Equal(t, date(0), days[29]["date"])
		var sum int64
		for _, d := range days {
			sum += num(d["costCents"])
		}
		require.EqualValues(t, 5+7+11+13, sum, "the event 40 days ago is outside the default range")
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		requireValidation(t, h.Do("GET", path+"?from=yesterday", nil), "from")
		requireValidation(t, h.Do("GET", path+"?to=2026-13-01", nil), "to")
		requireValidation(t, h.Do("GET", path+"?from="+date(0)+"&to="+date(-1), nil), "from")
		requireValidation(t, h.Do("GET", path+"?from="+date(-366)+"&to="+date(0), nil), "from")
		requireValidation(t, h.Do("GET", path+"?agentId=nope", nil), "agentId")
		requireValidation(t, h.Do("GET", path+"?projectId=nope", nil), "projectId")
		do(t, h, http.StatusOK, "GET", path+"?from="+date(-365)+"&to="+date(0), nil)
		res := h.Do("GET", "/api/companies/00000000-0000-0000-0000-000000000000/costs/by-day", nil)
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	})
}
