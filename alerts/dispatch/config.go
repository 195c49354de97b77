package dispatch

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"governor.dev/governor/alerts"
)

// Route sends the alerts it matches to a receiver, grouped by GroupBy.
type Route struct {
	Receiver string          `json:"receiver"`
	Matchers alerts.Matchers `json:"matchers,omitempty"`
	// Severities restricts the route to these tiers (empty: all).
	Severities []alerts.Severity `json:"severities,omitempty"`
	// GroupBy names the labels that form a group; default alertname,
	// service. GroupByAll ("...") alone groups by every label, so that
	// each distinct label set is a group of its own.
	GroupBy []string `json:"group_by,omitempty"`
	// Continue lets later routes match the alert too.
	Continue bool `json:"continue,omitempty"`
}

// DefaultGroupBy groups alerts of one rule and service.
func DefaultGroupBy() []string { return []string{"alertname", "service"} }

// GroupByAll, as the only name of GroupBy, groups by every label, as
// Alertmanager's group_by: ['...'].
const GroupByAll = "..."

// groupsByAll reports whether the route groups by every label.
func (r Route) groupsByAll() bool { return len(r.GroupBy) == 1 && r.GroupBy[0] == GroupByAll }

func (r Route) groupBy() []string {
	if len(r.GroupBy) == 0 {
		return DefaultGroupBy()
	}
	return r.GroupBy
}

// Matches reports whether the route takes an alert with labels l.
func (r Route) Matches(l alerts.Labels) bool {
	if len(r.Severities) > 0 {
		s, err := alerts.ParseSeverity(l[alerts.SeverityLabel])
		if err != nil || !slices.Contains(r.Severities, s) {
			return false
		}
	}
	return r.Matchers.Matches(l)
}

// Validate names the first bad field: the receiver, a severity, or a
// group_by entry by its index (group_by[1]) that is not a label name, or
// is GroupByAll beside other names.
func (r Route) Validate() error {
	if r.Receiver == "" {
		return fmt.Errorf("%w: route: receiver must not be empty", alerts.ErrInvalid)
	}
	for _, s := range r.Severities {
		if _, err := alerts.ParseSeverity(string(s)); err != nil {
			return fmt.Errorf("route %s: severities: %w", r.Receiver, err)
		}
	}
	for i, g := range r.GroupBy {
		if g == GroupByAll {
			if !r.groupsByAll() {
				return fmt.Errorf("%w: route %s: group_by[%d]: %q groups by every label and must be the only name, got %q",
					alerts.ErrInvalid, r.Receiver, i, GroupByAll, r.GroupBy)
			}
			continue
		}
		if _, err := alerts.NewMatcher(alerts.MatchEqual, g, ""); err != nil {
			return fmt.Errorf("%w: route %s: group_by[%d]: %q is not a label name: want [a-zA-Z_][a-zA-Z0-9_]*",
				alerts.ErrInvalid, r.Receiver, i, g)
		}
	}
	return nil
}

// CatchesAll reports whether the route takes every alert that reaches it:
// it has neither matchers nor severities.
func (r Route) CatchesAll() bool { return len(r.Matchers) == 0 && len(r.Severities) == 0 }

// ValidateRoutes validates each route and refuses routes that let an alert
// go unrouted: as Alertmanager's root route has a receiver, one route must
// catch every alert (CatchesAll). An alert reaching it is routed there; one
// that does not was taken by an earlier route without continue.
func ValidateRoutes(routes []Route) error {
	for i, r := range routes {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("routes[%d]: %w", i, err)
		}
	}
	if !slices.ContainsFunc(routes, Route.CatchesAll) {
		return fmt.Errorf("%w: routes: no route catches every alert, so alerts no route matches would notify nobody: "+
			"end the routes with one without matchers and severities, as Alertmanager's root route, "+
			`e.g. {"receiver": "<default receiver>"}`, alerts.ErrInvalid)
	}
	return nil
}

// Timing holds the grouping and repeat intervals.
type Timing struct {
	// GroupWait holds a new group so that alerts raised together are sent
	// together; default 30s, none with NoGroupWait.
	GroupWait time.Duration `json:"group_wait,omitempty"`
	// NoGroupWait sends the first notification of a new group at the flush
	// that forms it (group_wait "0s" in the configuration); GroupWait must
	// then be 0.
	NoGroupWait bool `json:"no_group_wait,omitempty"`
	// GroupInterval is the least time between two notifications of one
	// group about new or resolved alerts; default 5m.
	GroupInterval time.Duration `json:"group_interval,omitempty"`
	// Repeat is the repeat interval of an unchanged firing group, by tier;
	// defaults P0 5m, P1 1h, P2 24h. A tier given must have a positive
	// interval. As in Alertmanager, a group never repeats more often than
	// GroupInterval: a repeat interval below it acts as GroupInterval.
	Repeat map[alerts.Severity]time.Duration `json:"repeat,omitempty"`
	// BusinessHours gate P2 notifications (first, repeat and resolve).
	BusinessHours BusinessHours `json:"business_hours"`
	// P2Digest sends P2 groups at most once a day, at the first step after
	// business hours open, instead of as they change: a daily digest.
	P2Digest bool `json:"p2_digest,omitempty"`
}

// DefaultTiming returns the shipped intervals.
func DefaultTiming() Timing {
	return Timing{GroupWait: 30 * time.Second, GroupInterval: 5 * time.Minute,
		Repeat:        map[alerts.Severity]time.Duration{alerts.P0: 5 * time.Minute, alerts.P1: time.Hour, alerts.P2: 24 * time.Hour},
		BusinessHours: DefaultBusinessHours()}
}

// WithDefaults fills zero fields from DefaultTiming (GroupWait stays 0
// with NoGroupWait) and the tiers missing from Repeat.
func (t Timing) WithDefaults() Timing {
	d := DefaultTiming()
	if t.GroupWait == 0 && !t.NoGroupWait {
		t.GroupWait = d.GroupWait
	}
	if t.GroupInterval == 0 {
		t.GroupInterval = d.GroupInterval
	}
	rep := maps.Clone(d.Repeat)
	maps.Copy(rep, t.Repeat)
	t.Repeat = rep
	if t.BusinessHours.EndHour == 0 && t.BusinessHours.StartHour == 0 {
		// Hours omitted: the default hours, in the location and on the
		// days given (a location alone must not fall back to UTC).
		t.BusinessHours.StartHour, t.BusinessHours.EndHour = d.BusinessHours.StartHour, d.BusinessHours.EndHour
	}
	return t
}

// repeat returns the repeat interval in force for tier: Repeat, or
// GroupInterval when that is longer.
func (t Timing) repeat(tier alerts.Severity) time.Duration {
	return max(t.Repeat[tier], t.GroupInterval)
}

// ShortRepeats returns, sorted, the tiers whose repeat interval is below
// GroupInterval, and so repeat every GroupInterval instead, for a caller to
// warn about as Alertmanager does.
func (t Timing) ShortRepeats() []alerts.Severity {
	var out []alerts.Severity
	for _, s := range slices.Sorted(maps.Keys(t.Repeat)) {
		if t.Repeat[s] < t.GroupInterval {
			out = append(out, s)
		}
	}
	return out
}

// Validate names the first bad field.
func (t Timing) Validate() error {
	if t.GroupWait < 0 || t.GroupInterval < 0 {
		return fmt.Errorf("%w: timing: group_wait and group_interval must not be negative", alerts.ErrInvalid)
	}
	if t.NoGroupWait && t.GroupWait != 0 {
		return fmt.Errorf("%w: timing: group_wait %s contradicts no_group_wait", alerts.ErrInvalid, t.GroupWait)
	}
	for _, s := range slices.Sorted(maps.Keys(t.Repeat)) {
		if _, err := alerts.ParseSeverity(string(s)); err != nil {
			return fmt.Errorf("timing: repeat: %w", err)
		}
		if v := t.Repeat[s]; v <= 0 {
			return fmt.Errorf("%w: timing: repeat.%s: must be positive, got %s", alerts.ErrInvalid, s, v)
		}
	}
	return t.BusinessHours.Validate()
}

// BusinessHours is a weekly window in a time zone.
type BusinessHours struct {
	// StartHour and EndHour bound the window, 0 <= start < end <= 24;
	// both omitted (0): 9 to 17.
	StartHour int `json:"start_hour"`
	EndHour   int `json:"end_hour"`
	// Weekdays open; default Monday to Friday.
	Weekdays []time.Weekday `json:"weekdays,omitempty"`
	// Location is an IANA zone name; default UTC.
	Location string `json:"location,omitempty"`
	// loc is Location loaded once, by New: loading a zone reads and
	// parses the zone database, which a flush must not do for every P2
	// group it holds. Nil, or another zone than Location names (a copy
	// whose Location was changed): loaded at each use.
	loc *time.Location
}

// location returns the zone of the business hours: the one New loaded,
// else Location loaded now (UTC when it does not load, which Validate
// refuses).
func (b BusinessHours) location() *time.Location {
	if b.loc != nil && b.loc.String() == cmp.Or(b.Location, "UTC") {
		return b.loc
	}
	loc, err := time.LoadLocation(b.Location)
	if err != nil {
		return time.UTC
	}
	return loc
}

// DefaultBusinessHours is 09:00-17:00 UTC, Monday to Friday.
func DefaultBusinessHours() BusinessHours {
	return BusinessHours{StartHour: 9, EndHour: 17,
		Weekdays: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}}
}

// Validate names the first bad field.
func (b BusinessHours) Validate() error {
	if b.StartHour < 0 || b.EndHour > 24 || b.StartHour >= b.EndHour {
		return fmt.Errorf("%w: business_hours: need 0 <= start_hour < end_hour <= 24, got %d-%d", alerts.ErrInvalid, b.StartHour, b.EndHour)
	}
	for _, d := range b.Weekdays {
		if d < time.Sunday || d > time.Saturday {
			return fmt.Errorf("%w: business_hours: weekday %d out of range 0-6", alerts.ErrInvalid, d)
		}
	}
	if _, err := time.LoadLocation(b.Location); err != nil {
		return fmt.Errorf("%w: business_hours: location %q: %v", alerts.ErrInvalid, b.Location, err)
	}
	return nil
}

// Opening returns the start of the business day containing t, or of the
// last one before it.
func (b BusinessHours) Opening(t time.Time) time.Time {
	loc := b.location()
	days := b.Weekdays
	if len(days) == 0 {
		days = DefaultBusinessHours().Weekdays
	}
	lt := t.In(loc)
	for i := 0; i < 8; i++ {
		d := lt.AddDate(0, 0, -i)
		o := time.Date(d.Year(), d.Month(), d.Day(), b.StartHour, 0, 0, 0, loc)
		if slices.Contains(days, d.Weekday()) && !o.After(t) {
			return o
		}
	}
	return time.Time{}
}

// Contains reports whether t is within business hours.
func (b BusinessHours) Contains(t time.Time) bool {
	loc := b.location()
	lt := t.In(loc)
	days := b.Weekdays
	if len(days) == 0 {
		days = DefaultBusinessHours().Weekdays
	}
	return slices.Contains(days, lt.Weekday()) && lt.Hour() >= b.StartHour && lt.Hour() < b.EndHour
}
