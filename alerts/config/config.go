// Package config reads the alerting configuration: rules, routes, timing,
// inhibition rules and receivers, as strict JSON with Go duration strings
// ("5m"). Parse validates the whole document and names the first bad field
// with its path; nothing is half-applied.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/inhibit"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/alertmanager"
	"governor.dev/governor/alerts/notify/email"
	"governor.dev/governor/alerts/notify/pagerduty"
	"governor.dev/governor/alerts/notify/slack"
	"governor.dev/governor/alerts/notify/webhook"
	"governor.dev/governor/alerts/rule"
)

// Duration is a time.Duration written as a Go duration string.
type Duration time.Duration

// UnmarshalJSON reads "90s", "5m", "1h30m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string like \"5m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Config is the alerting document.
type Config struct {
	// BuiltinRules: "enabled" (default) or "disabled".
	BuiltinRules string           `json:"builtin_rules,omitempty"`
	Rules        []Rule           `json:"rules,omitempty"`
	Routes       []dispatch.Route `json:"routes"`
	Timing       Timing           `json:"timing"`
	Inhibit      *[]inhibit.Rule  `json:"inhibit_rules,omitempty"`
	Receivers    []Receiver       `json:"receivers"`
}

// Rule is rule.Rule with duration strings. An omitted resolve_after takes
// rule.DefaultResolveAfter; "0s" is refused, not replaced by it.
type Rule struct {
	Name          string            `json:"name"`
	Expr          string            `json:"expr,omitempty"`
	Event         string            `json:"event,omitempty"`
	Severity      alerts.Severity   `json:"severity,omitempty"`
	For           Duration          `json:"for,omitempty"`
	KeepFiringFor Duration          `json:"keep_firing_for,omitempty"`
	ResolveAfter  *Duration         `json:"resolve_after,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
	Disabled      bool              `json:"disabled,omitempty"`
}

// Timing is dispatch.Timing with duration strings. An omitted field takes
// its default; an explicit "0s" keeps its literal meaning where it has one
// (group_wait: notify a new group at once) and is refused where it has
// none (group_interval, repeat), never replaced by the default.
type Timing struct {
	GroupWait     *Duration                    `json:"group_wait,omitempty"`
	GroupInterval *Duration                    `json:"group_interval,omitempty"`
	Repeat        map[alerts.Severity]Duration `json:"repeat,omitempty"`
	BusinessHours *dispatch.BusinessHours      `json:"business_hours,omitempty"`
	// P2Digest sends P2 alerts once a day at the business-day opening.
	P2Digest bool `json:"p2_digest,omitempty"`
}

// Receiver names one integration; exactly one of its fields is set.
type Receiver struct {
	Name         string               `json:"name"`
	Webhook      *webhook.Config      `json:"webhook,omitempty"`
	Alertmanager *alertmanager.Config `json:"alertmanager,omitempty"`
	PagerDuty    *pagerduty.Config    `json:"pagerduty,omitempty"`
	Slack        *slack.Config        `json:"slack,omitempty"`
	Email        *email.Config        `json:"email,omitempty"`
}

// Parse decodes and validates a document. Unknown fields are refused.
func Parse(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: config: %v", alerts.ErrInvalid, decodeError(b, err))
	}
	// Anything but white space after the document, a closing bracket
	// included (which dec.More does not report), is refused.
	if off := dec.InputOffset(); len(bytes.TrimSpace(b[off:])) > 0 {
		line := 1 + bytes.Count(b[:off], []byte("\n"))
		return nil, fmt.Errorf("%w: config: line %d: trailing data after the document", alerts.ErrInvalid, line)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeError adds the line and column of a syntax or type error, and the
// line, column and path (routes[1].matchers) of a value that its field's
// decoder refused (a duration, matchers), which encoding/json does not say.
func decodeError(b []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the offset is past the offending byte
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
	default:
		if bad, ok := locate(b); ok {
			line, col := position(b, int64(bad.off))
			return fmt.Errorf("line %d, column %d: %s: %w", line, col, bad.path, err)
		}
	}
	if off < 0 || off > int64(len(b)) {
		return err
	}
	line, col := position(b, off)
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// position returns the line and column (from 1) of offset off of b.
func position(b []byte, off int64) (line, col int) {
	return 1 + bytes.Count(b[:off], []byte("\n")), int(off) - bytes.LastIndexByte(b[:off], '\n')
}

// RuleSet returns the rules to run: the built-in ones unless disabled,
// replaced by name by the configured ones.
func (c *Config) RuleSet() []rule.Rule {
	var out []rule.Rule
	if c.BuiltinRules != "disabled" {
		out = rule.Builtin()
	}
	for _, r := range c.Rules {
		rr := r.rule()
		if i := slices.IndexFunc(out, func(o rule.Rule) bool { return o.Name == r.Name }); i >= 0 {
			out[i] = rr
		} else {
			out = append(out, rr)
		}
	}
	return out
}

// rule converts the rule; an omitted resolve_after stays zero (the default).
func (r Rule) rule() rule.Rule {
	rr := rule.Rule{Name: r.Name, Expr: r.Expr, Event: r.Event, Severity: r.Severity, For: time.Duration(r.For),
		KeepFiringFor: time.Duration(r.KeepFiringFor), Labels: r.Labels, Annotations: r.Annotations, Disabled: r.Disabled}
	if r.ResolveAfter != nil {
		rr.ResolveAfter = time.Duration(*r.ResolveAfter)
	}
	return rr
}

// DispatchTiming converts the timing (omitted fields take defaults later;
// group_wait "0s" is dispatch.Timing.NoGroupWait).
func (c *Config) DispatchTiming() dispatch.Timing {
	t := dispatch.Timing{P2Digest: c.Timing.P2Digest}
	if c.Timing.GroupWait != nil {
		t.GroupWait = time.Duration(*c.Timing.GroupWait)
		t.NoGroupWait = t.GroupWait == 0
	}
	if c.Timing.GroupInterval != nil {
		t.GroupInterval = time.Duration(*c.Timing.GroupInterval)
	}
	if len(c.Timing.Repeat) > 0 {
		t.Repeat = map[alerts.Severity]time.Duration{}
		for s, d := range c.Timing.Repeat {
			t.Repeat[s] = time.Duration(d)
		}
	}
	if c.Timing.BusinessHours != nil {
		t.BusinessHours = *c.Timing.BusinessHours
	}
	return t
}

// Warnings lists what the document accepts but probably does not mean, for
// the person editing it to see beside the saved result; a warning never
// refuses the document. As Alertmanager, a repeat interval below the group
// interval (given or default) is accepted and acts as the group interval:
// each such tier is named with both intervals.
func (c *Config) Warnings() []string {
	out := []string{}
	t := c.DispatchTiming().WithDefaults()
	for _, s := range t.ShortRepeats() {
		repeat := t.Repeat[s].String()
		if _, given := c.Timing.Repeat[s]; !given {
			repeat += " (the default)"
		}
		interval := t.GroupInterval.String()
		if c.Timing.GroupInterval == nil {
			interval += " (the default)"
		}
		out = append(out, fmt.Sprintf("timing.repeat.%s: %s is below timing.group_interval %s: %s groups repeat every %s",
			s, repeat, interval, s, t.GroupInterval))
	}
	return out
}

// InhibitRules returns the configured rules, the defaults when absent and
// none for an empty list.
func (c *Config) InhibitRules() []inhibit.Rule {
	if c.Inhibit == nil {
		return inhibit.Defaults()
	}
	return *c.Inhibit
}

// Validate checks the whole document and names the first bad field by its
// path (receivers[2], timing.repeat.P1); the fields of a route or an
// inhibition rule follow its position as its own Validate names them
// (routes[0]: ... group_by[1], inhibit_rules[0]: ... equal[1]). Receiver
// and rule names must be printable, without leading or trailing spaces, at
// most MaxNameLen characters and unique; a duplicate is named with both
// positions.
func (c *Config) Validate() error {
	if c.BuiltinRules != "" && c.BuiltinRules != "enabled" && c.BuiltinRules != "disabled" {
		return fmt.Errorf("%w: config: builtin_rules %q: want enabled or disabled", alerts.ErrInvalid, c.BuiltinRules)
	}
	// Each rule is checked at its position in the document: in RuleSet the
	// built-in rules come first, and a second rule of one name would replace
	// the first.
	ruleAt := map[string]int{}
	for i, r := range c.Rules {
		if err := checkName(r.Name); err != nil {
			return fmt.Errorf("%w: config: rules[%d]: %w", alerts.ErrInvalid, i, err)
		}
		if j, ok := ruleAt[r.Name]; ok {
			return fmt.Errorf("%w: config: rules[%d]: name %q is used twice: rules[%d] and rules[%d]", alerts.ErrInvalid, i, r.Name, j, i)
		}
		ruleAt[r.Name] = i
		if r.ResolveAfter != nil && *r.ResolveAfter == 0 {
			return fmt.Errorf("%w: config: rules[%d] (%s): resolve_after: must be positive; omit it for the default %s",
				alerts.ErrInvalid, i, r.Name, rule.DefaultResolveAfter)
		}
		if err := r.rule().Validate(); err != nil {
			return fmt.Errorf("config: rules[%d]: %w", i, err)
		}
	}
	if err := rule.ValidateSet(c.RuleSet()); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if len(c.Receivers) == 0 {
		return fmt.Errorf("%w: config: receivers: at least one is required", alerts.ErrInvalid)
	}
	names := map[string]int{}
	for i, r := range c.Receivers {
		if err := checkName(r.Name); err != nil {
			return fmt.Errorf("%w: config: receivers[%d]: %w", alerts.ErrInvalid, i, err)
		}
		if j, ok := names[r.Name]; ok {
			return fmt.Errorf("%w: config: receivers[%d]: name %q is used twice: receivers[%d] and receivers[%d]", alerts.ErrInvalid, i, r.Name, j, i)
		}
		names[r.Name] = i
		if _, err := r.build(nil); err != nil {
			return fmt.Errorf("config: receivers[%d] (%s): %w", i, r.Name, r.redact(err))
		}
	}
	if len(c.Routes) == 0 && len(c.Receivers) > 1 {
		return fmt.Errorf("%w: config: routes: required with more than one receiver", alerts.ErrInvalid)
	}
	for i, r := range c.Routes {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("config: routes[%d]: %w", i, err)
		}
		if _, ok := names[r.Receiver]; !ok {
			defined := make([]string, 0, len(names))
			for _, n := range c.ReceiverNames() {
				defined = append(defined, strconv.Quote(n))
			}
			return fmt.Errorf("%w: config: routes[%d]: receiver %q is not defined; receivers are %s",
				alerts.ErrInvalid, i, r.Receiver, strings.Join(defined, ", "))
		}
	}
	if len(c.Routes) > 0 {
		// Without routes the one receiver takes every alert.
		if err := dispatch.ValidateRoutes(c.Routes); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	if d := c.Timing.GroupInterval; d != nil && *d == 0 {
		return fmt.Errorf("%w: config: timing.group_interval: must be positive, got 0s; omit it for the default %s",
			alerts.ErrInvalid, dispatch.DefaultTiming().GroupInterval)
	}
	for _, s := range slices.Sorted(maps.Keys(c.Timing.Repeat)) {
		if _, err := alerts.ParseSeverity(string(s)); err != nil {
			return fmt.Errorf("config: timing.repeat: %w", err)
		}
		if c.Timing.Repeat[s] == 0 {
			return fmt.Errorf("%w: config: timing.repeat.%s: must be positive, got 0s; omit it for the default %s",
				alerts.ErrInvalid, s, dispatch.DefaultTiming().Repeat[s])
		}
	}
	if err := c.DispatchTiming().WithDefaults().Validate(); err != nil {
		return fmt.Errorf("config: timing: %w", err)
	}
	if _, err := inhibit.New(c.InhibitRules()); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// build makes the receiver's notifier, with its send_resolved setting
// applied (notify.FilterResolved) whatever its kind.
func (r Receiver) build(client *http.Client) (notify.Notifier, error) {
	set := 0
	for _, p := range []bool{r.Webhook != nil, r.Alertmanager != nil, r.PagerDuty != nil, r.Slack != nil, r.Email != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: exactly one of webhook, alertmanager, pagerduty, slack, email is required, got %d", alerts.ErrInvalid, set)
	}
	var (
		n            notify.Notifier
		sendResolved *bool
		err          error
	)
	switch {
	case r.Webhook != nil:
		n, err = webhook.New(*r.Webhook, client)
		sendResolved = r.Webhook.SendResolved
	case r.Alertmanager != nil:
		n, err = alertmanager.New(*r.Alertmanager, client)
		sendResolved = r.Alertmanager.SendResolved
	case r.PagerDuty != nil:
		n, err = pagerduty.New(*r.PagerDuty, client)
		sendResolved = r.PagerDuty.SendResolved
	case r.Slack != nil:
		n, err = slack.New(*r.Slack, client)
		sendResolved = r.Slack.SendResolved
	default:
		n, err = email.New(*r.Email)
		sendResolved = r.Email.SendResolved
	}
	if err != nil {
		return nil, err
	}
	return notify.FilterResolved(n, sendResolved), nil
}

// Notifiers builds the receivers; client nil uses default HTTP clients.
func (c *Config) Notifiers(client *http.Client) (map[string]notify.Notifier, error) {
	out := map[string]notify.Notifier{}
	for _, r := range c.Receivers {
		n, err := r.build(client)
		if err != nil {
			return nil, fmt.Errorf("config: receiver %s: %w", r.Name, r.redact(err))
		}
		out[r.Name] = n
	}
	return out, nil
}

// ReceiverNames lists the receivers, sorted.
func (c *Config) ReceiverNames() []string {
	m := map[string]bool{}
	for _, r := range c.Receivers {
		m[r.Name] = true
	}
	return slices.Sorted(maps.Keys(m))
}
