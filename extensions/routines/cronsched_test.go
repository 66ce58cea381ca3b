package routines

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustSchedule(t *testing.T, expr, tz string) *schedule {
	t.Helper()
	s, err := parseSchedule(expr, tz)
	require.NoError(t, err, "%s %s", expr, tz)
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseScheduleRefusesBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct{ expr, tz, want string }{
		{"", "UTC", "is required"},
		{"61 * * * *", "UTC", "not a valid cron"},
		{"* * * *", "UTC", "not a valid cron"},
		{"* * * * * *", "UTC", "not a valid cron"},
		{"@every 5m", "UTC", "@every"},
		{"TZ=UTC * * * * *", "UTC", "timezone"},
		{"CRON_TZ=UTC * * * * *", "UTC", "timezone"},
		{"0 0 30 2 *", "UTC", "never fires"},
		{"* * * * *", "Mars/Olympus_Mons", "not an IANA timezone"},
		{"* * * * *", "Local", "IANA name"},
		{"* * * * *", "", "IANA name"},
	}
	for _, tc := range cases {
		_, err := parseSchedule(tc.expr, tc.tz)
		require.Error(t, err, "%q %q", tc.expr, tc.tz)
		require.Contains(t, err.Error(), tc.want, "%q %q", tc.expr, tc.tz)
	}
	for _, expr := range []string{"@daily", "@hourly", "0 9 * * 1-5", "*/15 * * * *", "0 0 1 1 *"} {
		mustSchedule(t, expr, "Europe/Berlin")
	}
}

func TestScheduleNextComputedInTheTimezone(t *testing.T) {
	t.Parallel()
	s := mustSchedule(t, "0 9 * * *", "Europe/Berlin")
	// 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
	require.Equal(t, utc("2026-01-15T08:00:00Z"), s.next(utc("2026-01-15T07:59:00Z")).UTC())
	require.Equal(t, utc("2026-07-15T07:00:00Z"), s.next(utc("2026-07-15T06:00:00Z")).UTC())
	require.Equal(t, utc("2026-07-16T07:00:00Z"), s.next(utc("2026-07-15T07:00:00Z")).UTC(), "strictly after")
	weekday := mustSchedule(t, "30 8 * * 1-5", "America/New_York")
	// Friday 2026-11-27 08:30 EST, then Monday 2026-11-30.
	require.Equal(t, utc("2026-11-27T13:30:00Z"), weekday.next(utc("2026-11-27T12:00:00Z")).UTC())
	require.Equal(t, utc("2026-11-30T13:30:00Z"), weekday.next(utc("2026-11-27T13:30:00Z")).UTC())
}

// An every-minute schedule runs on every real minute across both changes: no gap in the
// skipped hour, no repeat in the doubled one.
func TestScheduleEveryMinuteAcrossDST(t *testing.T) {
	t.Parallel()
	s := mustSchedule(t, "* * * * *", "America/New_York")
	for _, day := range []struct{ from, to string }{
		{"2026-03-08T05:00:00Z", "2026-03-08T09:00:00Z"}, // 00:00 EST → 05:00 EDT, 02:xx skipped
		{"2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z"}, // 00:00 EDT → 03:00 EST, 01:xx twice
	} {
		cur, end := utc(day.from), utc(day.to)
		n := 0
		for cur.Before(end) {
			next := s.next(cur)
			require.Equal(t, time.Minute, next.Sub(cur), "after %s", cur.UTC())
			cur = next
			n++
		}
		require.Equal(t, 240, n)
	}
}

func TestSchedulePinnedHoursAcrossDST(t *testing.T) {
	t.Parallel()
	// 02:30 does not exist on 2026-03-08 in New York: the run happens when the gap ends
	// (03:00 EDT = 07:00Z), once; the next day is back to 02:30 EDT.
	s := mustSchedule(t, "30 2 * * *", "America/New_York")
	require.Equal(t, utc("2026-03-08T07:00:00Z"), s.next(utc("2026-03-08T05:00:00Z")).UTC())
	require.Equal(t, utc("2026-03-09T06:30:00Z"), s.next(utc("2026-03-08T07:00:00Z")).UTC())
	require.Equal(t, utc("2026-03-07T07:30:00Z"), s.next(utc("2026-03-07T05:00:00Z")).UTC(), "02:30 EST the day before")

	// 01:30 happens twice on 2026-11-01: the run happens at the first (EDT) only.
	s = mustSchedule(t, "30 1 * * *", "America/New_York")
	require.Equal(t, utc("2026-11-01T05:30:00Z"), s.next(utc("2026-11-01T04:00:00Z")).UTC())
	require.Equal(t, utc("2026-11-02T06:30:00Z"), s.next(utc("2026-11-01T05:30:00Z")).UTC())

	// Every 15 minutes of hour 1: four runs on the fall-back day, not eight.
	s = mustSchedule(t, "*/15 1 * * *", "America/New_York")
	var got []time.Time
	for cur := utc("2026-11-01T04:00:00Z"); len(got) < 5; {
		cur = s.next(cur)
		got = append(got, cur.UTC())
	}
	require.Equal(t, []time.Time{utc("2026-11-01T05:00:00Z"), utc("2026-11-01T05:15:00Z"), utc("2026-11-01T05:30:00Z"),
		utc("2026-11-01T05:45:00Z"), utc("2026-11-02T06:00:00Z")}, got)

	// Hourly runs every real hour, both 01:00s included.
	s = mustSchedule(t, "0 * * * *", "America/New_York")
	require.Equal(t, utc("2026-11-01T06:00:00Z"), s.next(utc("2026-11-01T05:00:00Z")).UTC())
	require.Equal(t, utc("2026-03-08T07:00:00Z"), s.next(utc("2026-03-08T06:00:00Z")).UTC())
}

func TestScheduleDueTicks(t *testing.T) {
	t.Parallel()
	s := mustSchedule(t, "* * * * *", "UTC")
	now := utc("2026-06-01T12:00:30Z")
	// Ninety missed minutes: the latest 25, oldest first, ending at the current minute.
	ticks := s.dueTicks(utc("2026-06-01T10:31:00Z"), now, 25)
	require.Len(t, ticks, 25)
	require.Equal(t, utc("2026-06-01T11:36:00Z"), ticks[0])
	require.Equal(t, utc("2026-06-01T12:00:00Z"), ticks[24])
	// Fewer than the cap: all of them.
	ticks = s.dueTicks(utc("2026-06-01T11:51:00Z"), now, 25)
	require.Len(t, ticks, 10)
	require.Equal(t, utc("2026-06-01T11:51:00Z"), ticks[0])
	// skip_missed keeps only the latest.
	require.Equal(t, []time.Time{utc("2026-06-01T12:00:00Z")}, s.dueTicks(utc("2026-06-01T10:31:00Z"), now, 1))
	require.Empty(t, s.dueTicks(utc("2026-06-01T12:01:00Z"), now, 1), "nothing due yet")

	// A year of per-minute downtime costs no more than a few windows.
	start := time.Now()
	ticks = s.dueTicks(utc("2025-06-01T12:00:00Z"), now, 25)
	require.Len(t, ticks, 25)
	require.Equal(t, utc("2026-06-01T12:00:00Z"), ticks[24])
	require.Less(t, time.Since(start), time.Second)

	daily := mustSchedule(t, "0 6 * * *", "America/New_York")
	ticks = daily.dueTicks(utc("2026-05-29T10:00:00Z"), now, 25)
	require.Equal(t, []time.Time{utc("2026-05-29T10:00:00Z"), utc("2026-05-30T10:00:00Z"), utc("2026-05-31T10:00:00Z"),
		utc("2026-06-01T10:00:00Z")}, utcAll(ticks))
}

func utcAll(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}
