package statuscards

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // activeHours time zones resolve without the machine's zoneinfo

	"github.com/keelhq/keel/sdk"
)

// Refresh modes and policy defaults (spec part 1 "refreshPolicy object", "Limits").
const (
	modeManual   = "manual"
	modeInterval = "interval"
	modeReactive = "reactive"

	defaultMaxUpdatesPerHour = 6
	defaultDailyTokenCap     = 100000
)

// Validation texts the spec quotes.
const (
	msgRequiredInterval = "Required for interval mode"
	msgRequiredReactive = "Required for reactive mode"
)

// RefreshPolicy is a card's stored refresh policy, defaults filled in.
type RefreshPolicy struct {
	Mode              string       `json:"mode"`
	IntervalMinutes   *int         `json:"intervalMinutes"`
	DebounceSeconds   *int         `json:"debounceSeconds"`
	MaxUpdatesPerHour int          `json:"maxUpdatesPerHour"`
	Triggers          Triggers     `json:"triggers"`
	ActiveHours       *ActiveHours `json:"activeHours"`
	DailyTokenCap     int          `json:"dailyTokenCap"`
}

// Triggers say which change kinds start an automatic update.
type Triggers struct {
	StatusTransitions bool `json:"statusTransitions"`
	MembershipChanges bool `json:"membershipChanges"`
	HumanComments     bool `json:"humanComments"`
	AssigneeChanges   bool `json:"assigneeChanges"`
	AnyUpdate         bool `json:"anyUpdate"`
}

// ActiveHours is the daily window, in an IANA zone, in which automatic updates run.
type ActiveHours struct {
	Start    string `json:"start"`
	End      string `json:"end"`
	Timezone string `json:"timezone"`
}

// RefreshPolicyBody is the refreshPolicy object of a create or patch body; absent fields take
// their defaults.
type RefreshPolicyBody struct {
	// Mode is manual (default), interval or reactive.
	Mode *string `json:"mode,omitempty" jsonschema:"enum=manual,enum=interval,enum=reactive"`
	// IntervalMinutes is required for interval mode.
	IntervalMinutes *int `json:"intervalMinutes,omitempty"`
	// DebounceSeconds is required for reactive mode.
	DebounceSeconds *int `json:"debounceSeconds,omitempty"`
	// MaxUpdatesPerHour caps reactive updates (default 6).
	MaxUpdatesPerHour *int `json:"maxUpdatesPerHour,omitempty"`
	// Triggers are the change kinds that start an automatic update.
	Triggers *TriggersBody `json:"triggers,omitempty"`
	// ActiveHours is {start, end (HH:MM), timezone (IANA)}; outside it the card pauses.
	ActiveHours *ActiveHours `json:"activeHours,omitempty"`
	// DailyTokenCap is the tokens per UTC day before automatic updates pause (default 100000).
	DailyTokenCap *int `json:"dailyTokenCap,omitempty"`
}

// TriggersBody is the triggers object of a refresh policy body.
type TriggersBody struct {
	StatusTransitions *bool `json:"statusTransitions,omitempty"`
	MembershipChanges *bool `json:"membershipChanges,omitempty"`
	HumanComments     *bool `json:"humanComments,omitempty"`
	AssigneeChanges   *bool `json:"assigneeChanges,omitempty"`
	AnyUpdate         *bool `json:"anyUpdate,omitempty"`
}

// defaultPolicy is the manual policy with every default.
func defaultPolicy() *RefreshPolicy {
	p, _ := (&RefreshPolicyBody{}).policy("refreshPolicy")
	return p
}

// policy validates the body and returns the policy with defaults, or the validation details.
func (b *RefreshPolicyBody) policy(path string) (*RefreshPolicy, []sdk.ValidationDetail) {
	var d []sdk.ValidationDetail
	bad := func(field, msg string) { d = append(d, sdk.ValidationDetail{Path: path + "." + field, Message: msg}) }
	p := &RefreshPolicy{Mode: modeManual, MaxUpdatesPerHour: defaultMaxUpdatesPerHour, DailyTokenCap: defaultDailyTokenCap,
		Triggers: Triggers{StatusTransitions: true, MembershipChanges: true, HumanComments: true, AssigneeChanges: true}}
	if b.Mode != nil {
		p.Mode = *b.Mode
	}
	switch p.Mode {
	case modeManual, modeInterval, modeReactive:
	default:
		bad("mode", "must be manual, interval or reactive")
	}
	positive := func(field string, v *int) {
		if v != nil && *v < 1 {
			bad(field, "must be a positive integer")
		}
	}
	positive("intervalMinutes", b.IntervalMinutes)
	positive("debounceSeconds", b.DebounceSeconds)
	positive("maxUpdatesPerHour", b.MaxUpdatesPerHour)
	positive("dailyTokenCap", b.DailyTokenCap)
	if p.Mode == modeInterval && b.IntervalMinutes == nil {
		bad("intervalMinutes", msgRequiredInterval)
	}
	if p.Mode == modeReactive && b.DebounceSeconds == nil {
		bad("debounceSeconds", msgRequiredReactive)
	}
	if b.IntervalMinutes != nil && *b.IntervalMinutes > 525600 {
		bad("intervalMinutes", "must be at most 525600 (a year)")
	}
	if b.DebounceSeconds != nil && *b.DebounceSeconds > 86400 {
		bad("debounceSeconds", "must be at most 86400 (a day)")
	}
	p.IntervalMinutes, p.DebounceSeconds = b.IntervalMinutes, b.DebounceSeconds
	if b.MaxUpdatesPerHour != nil {
		p.MaxUpdatesPerHour = *b.MaxUpdatesPerHour
	}
	if b.DailyTokenCap != nil {
		p.DailyTokenCap = *b.DailyTokenCap
	}
	if t := b.Triggers; t != nil {
		set := func(dst *bool, v *bool) {
			if v != nil {
				*dst = *v
			}
		}
		set(&p.Triggers.StatusTransitions, t.StatusTransitions)
		set(&p.Triggers.MembershipChanges, t.MembershipChanges)
		set(&p.Triggers.HumanComments, t.HumanComments)
		set(&p.Triggers.AssigneeChanges, t.AssigneeChanges)
		set(&p.Triggers.AnyUpdate, t.AnyUpdate)
	}
	if ah := b.ActiveHours; ah != nil {
		start, okS := parseClock(ah.Start)
		end, okE := parseClock(ah.End)
		if !okS {
			bad("activeHours.start", "must be a time HH:MM (24-hour)")
		}
		if !okE {
			bad("activeHours.end", "must be a time HH:MM (24-hour)")
		}
		if okS && okE && start == end {
			bad("activeHours.end", "must differ from start")
		}
		if strings.TrimSpace(ah.Timezone) == "" {
			bad("activeHours.timezone", "is required")
		} else if _, err := time.LoadLocation(ah.Timezone); err != nil || strings.EqualFold(ah.Timezone, "local") {
			bad("activeHours.timezone", "must be an IANA time zone name")
		}
		p.ActiveHours = &ActiveHours{Start: ah.Start, End: ah.End, Timezone: ah.Timezone}
	}
	return p, d
}

// parseClock reads HH:MM (24-hour) as minutes after midnight.
func parseClock(s string) (int, bool) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, false
	}
	return t.Hour()*60 + t.Minute(), true
}

// inWindow reports whether now falls inside the active hours, and when the window next
// opens (zero when now is inside). A window whose end is before its start spans midnight.
func (ah *ActiveHours) inWindow(now time.Time) (bool, time.Time) {
	loc, err := time.LoadLocation(ah.Timezone)
	start, okS := parseClock(ah.Start)
	end, okE := parseClock(ah.End)
	if err != nil || !okS || !okE {
		return true, time.Time{}
	}
	local := now.In(loc)
	m := local.Hour()*60 + local.Minute()
	var in bool
	if start < end {
		in = m >= start && m < end
	} else {
		in = m >= start || m < end
	}
	if in {
		return true, time.Time{}
	}
	// The next opening: today's start if still ahead, otherwise tomorrow's (in local time,
	// so a daylight-saving day keeps the wall-clock start).
	day := time.Date(local.Year(), local.Month(), local.Day(), start/60, start%60, 0, 0, loc)
	if !day.After(local) {
		day = time.Date(local.Year(), local.Month(), local.Day()+1, start/60, start%60, 0, 0, loc)
	}
	return false, day.UTC()
}

// counts reports whether a change kind starts an automatic update under the triggers.
func (t Triggers) counts(kind string) bool {
	if t.AnyUpdate {
		return true
	}
	switch kind {
	case changeNew, changeRemoved:
		return t.MembershipChanges
	case changeStatus:
		return t.StatusTransitions
	case changeAssignee:
		return t.AssigneeChanges
	case changeHumanComment:
		return t.HumanComments
	}
	return false
}

// relevant are the changes the triggers count.
func (t Triggers) relevant(changes []Change) []Change {
	out := []Change{}
	for _, c := range changes {
		if t.counts(c.ChangeKind) {
			out = append(out, c)
		}
	}
	return out
}

// String describes a policy for logs.
func (p *RefreshPolicy) String() string { return fmt.Sprintf("%s policy", p.Mode) }
