package routines

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even where the system has no zoneinfo.

	"github.com/robfig/cron/v3"
)

// A schedule trigger's next run is computed in its IANA timezone. Across daylight-saving
// changes keel follows cron's usual rules:
//
//   - Schedules that match every hour (* * * * *, */15 * * * *, 0 * * * *) run on real
//     time: every matching minute that exists, once. Nothing is skipped or repeated.
//   - Schedules pinned to hours (30 2 * * *, */15 1 * * *) run on wall-clock time: a time in
//     the skipped hour of a spring-forward change fires once, at the instant the gap ends
//     (02:30 → 03:00 new time); a time in the repeated hour of a fall-back change fires
//     once, at its first occurrence.

// cronParser reads five-field cron expressions and the @yearly … @hourly descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is robfig/cron's marker of a field written as "*".
const starBit = 1 << 63

// allHours is the bit set of hours 0-23.
const allHours = 1<<24 - 1

// schedule is a parsed cron expression in its timezone.
type schedule struct {
	spec     *cron.SpecSchedule
	loc      *time.Location
	allHours bool
}

// maxScheduleSpan is how far ahead a next run is searched; robfig/cron gives up after five
// years, which also catches expressions that never fire (February 30th).
const maxScheduleSpan = 5 * 366 * 24 * time.Hour

// parseSchedule validates a cron expression and an IANA timezone.
func parseSchedule(expr, tz string) (*schedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, errors.New("is required")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errors.New("must not carry a timezone; use the timezone field")
	}
	if strings.HasPrefix(expr, "@every") {
		return nil, errors.New("@every is not a cron schedule; use a five-field expression")
	}
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	parsed, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("is not a valid cron expression: %v", err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, errors.New("is not a cron schedule")
	}
	cp := *spec
	cp.Location = loc
	s := &schedule{spec: &cp, loc: loc, allHours: cp.Hour&allHours == allHours}
	if s.next(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, errors.New("never fires")
	}
	return s, nil
}

// loadZone loads an IANA timezone; "Local" and empty names are refused.
func loadZone(tz string) (*time.Location, error) {
	if tz == "" || tz == "Local" {
		return nil, errors.New("timezone must be an IANA name such as America/New_York")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timezone %q is not an IANA timezone", tz)
	}
	return loc, nil
}

// next returns the first run strictly after t, or the zero time when there is none.
func (s *schedule) next(t time.Time) time.Time {
	cur := t.In(s.loc)
	for range 10000 {
		cand := s.spec.Next(cur)
		if cand.IsZero() {
			return time.Time{}
		}
		if s.allHours {
			return cand
		}
		if g := s.gapRun(cur, cand); !g.IsZero() {
			return g
		}
		if s.repeatedWallTime(cand) {
			cur = cand
			continue
		}
		return cand
	}
	return time.Time{}
}

// repeatedWallTime reports whether t's wall-clock time already happened earlier the same
// day: t lies in the second pass of a fall-back change.
func (s *schedule) repeatedWallTime(t time.Time) bool {
	_, before := t.Add(-3 * time.Hour).In(s.loc).Zone()
	_, now := t.In(s.loc).Zone()
	if before <= now {
		return false
	}
	earlier := t.Add(-time.Duration(before-now) * time.Second).In(s.loc)
	lt := t.In(s.loc)
	return earlier.Year() == lt.Year() && earlier.YearDay() == lt.YearDay() &&
		earlier.Hour() == lt.Hour() && earlier.Minute() == lt.Minute()
}

// gapRun finds a spring-forward change in (from, until] during which the schedule matched
// a wall-clock minute that did not exist, and returns the instant the gap ended; zero when
// there is none.
func (s *schedule) gapRun(from, until time.Time) time.Time {
	if until.Sub(from) > 400*24*time.Hour {
		until = from.Add(400 * 24 * time.Hour)
	}
	step := 24 * time.Hour
	for a := from; a.Before(until); a = a.Add(step) {
		b := a.Add(step)
		if b.After(until) {
			b = until
		}
		_, oa := a.In(s.loc).Zone()
		_, ob := b.In(s.loc).Zone()
		if oa >= ob {
			continue
		}
		// Offsets grew within (a, b]: find the change to the minute.
		lo, hi := a, b
		for hi.Sub(lo) > time.Minute {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Minute)
			if !mid.After(lo) {
				mid = lo.Add(time.Minute)
			}
			if _, om := mid.In(s.loc).Zone(); om == oa {
				lo = mid
			} else {
				hi = mid
			}
		}
		change := hi
		shift := time.Duration(ob-oa) * time.Second
		// The skipped wall-clock minutes are [wall(change)-shift, wall(change)).
		wall := change.In(s.loc)
		start := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), 0, 0, time.UTC).Add(-shift)
		for m := start; m.Before(start.Add(shift)); m = m.Add(time.Minute) {
			if s.matchesWall(m) {
				return change
			}
		}
	}
	return time.Time{}
}

// matchesWall reports whether the wall-clock fields of w (read as UTC) match the schedule.
func (s *schedule) matchesWall(w time.Time) bool {
	sp := s.spec
	if 1<<uint(w.Minute())&sp.Minute == 0 || 1<<uint(w.Hour())&sp.Hour == 0 || 1<<uint(w.Month())&sp.Month == 0 {
		return false
	}
	dom := 1<<uint(w.Day())&sp.Dom > 0
	dow := 1<<uint(w.Weekday())&sp.Dow > 0
	if sp.Dom&starBit > 0 || sp.Dow&starBit > 0 {
		return dom && dow
	}
	return dom || dow
}

// dueTicks returns the runs of the schedule in [first, now], oldest first, keeping only the
// last max of them. first is itself a run (the trigger's stored nextRunAt).
func (s *schedule) dueTicks(first, now time.Time, max int) []time.Time {
	if first.After(now) || max < 1 {
		return nil
	}
	// Search back from now in growing windows until max runs are found or the window
	// reaches first, so a long outage of a per-minute schedule costs O(max), not O(outage).
	for window := time.Hour; ; window *= 2 {
		lo := now.Add(-window)
		fromFirst := !lo.After(first)
		t := first
		if !fromFirst {
			t = s.next(lo.Add(-time.Second))
		}
		var ticks []time.Time
		for !t.IsZero() && !t.After(now) {
			ticks = append(ticks, t)
			if len(ticks) > 4*max+1000 {
				ticks = ticks[len(ticks)-max:]
			}
			t = s.next(t)
		}
		if fromFirst || len(ticks) >= max {
			if len(ticks) > max {
				ticks = ticks[len(ticks)-max:]
			}
			return ticks
		}
	}
}
