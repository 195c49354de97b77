// Package pagerduty sends PagerDuty Events API v2 events: one per alert,
// deduplicated by the alert fingerprint, with trigger, acknowledge and
// resolve actions and severity critical / error / warning for P0 / P1 / P2.
//
// A group of thousands of alerts is thousands of events, more than one
// attempt of the receiver queue can send in its timeout and more than
// PagerDuty's rate limit lets through at once. The notifier therefore
// remembers, per group, which events PagerDuty accepted (dedup key, action
// and a hash of the event) until the group's state has been delivered
// whole, or for AcceptedTTL: a retry, or the manager's re-send of the same
// group state after the queue gave up, sends only the rest. An attempt
// stops before its deadline and reports its progress (notify.ErrPartial),
// which the queue does not count as a failed attempt. Once a group's
// state was delivered whole the memory is cleared, so a repeat
// notification sends every event again, as PagerDuty expects to re-open
// an incident that was resolved by hand while the alert still fires.
//
// A resolve is always sent, even for an alert whose trigger this process
// never saw accepted: PagerDuty ignores a resolve for an unknown dedup key,
// and the trigger may have reached it without its answer reaching us.
package pagerduty

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/sdk/clock"
)

// DefaultURL is PagerDuty's Events API v2 endpoint.
const DefaultURL = "https://events.pagerduty.com/v2/enqueue"

// Config of a PagerDuty receiver.
type Config struct {
	RoutingKey string `json:"routing_key"`
	// URL defaults to DefaultURL; tests point it at a local server.
	URL string `json:"url,omitempty"`
	// Source names the sender in the payload; default "governor".
	Source string `json:"source,omitempty"`
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if c.RoutingKey == "" {
		return fmt.Errorf("%w: pagerduty: routing_key must not be empty", alerts.ErrInvalid)
	}
	if c.URL != "" {
		return notify.ValidateURL("pagerduty: url", c.URL)
	}
	return nil
}

// Event is an Events API v2 request.
type Event struct {
	RoutingKey  string   `json:"routing_key"`
	EventAction string   `json:"event_action"`
	DedupKey    string   `json:"dedup_key"`
	Payload     *Payload `json:"payload,omitempty"`
}

// Payload describes a triggered alert.
type Payload struct {
	Summary       string            `json:"summary"`
	Source        string            `json:"source"`
	Severity      string            `json:"severity"`
	Component     string            `json:"component,omitempty"`
	Class         string            `json:"class,omitempty"`
	CustomDetails map[string]string `json:"custom_details,omitempty"`
}

// MaxSummaryLen is the longest summary PagerDuty accepts, in characters: a
// longer one makes it refuse the event (400 "'summary' is too long"), so
// Build truncates it.
const MaxSummaryLen = 1024

// MaxEventSize is the largest event PagerDuty accepts, in bytes of JSON
// (512 KB): a larger one gets a final 400, so Build cuts the values of
// custom_details until the event fits and says so in TruncatedKey.
const MaxEventSize = 512 << 10

// TruncatedKey is the custom_details entry of an event whose details were
// cut to fit MaxEventSize; it says how many bytes were cut.
const TruncatedKey = "governor_truncated"

// AcceptedTTL bounds how long the notifier remembers the events PagerDuty
// accepted for a group whose state was not delivered whole: long enough
// for the queue's attempts and the manager's re-send at the next group
// interval, short enough that a stale memory does not hide a trigger.
const AcceptedTTL = time.Hour

// SeverityOf maps tiers to PagerDuty severities.
func SeverityOf(s alerts.Severity) string {
	switch s {
	case alerts.P0:
		return "critical"
	case alerts.P1:
		return "error"
	}
	return "warning"
}

var _ notify.Notifier = (*Notifier)(nil)

// Notifier sends events.
type Notifier struct {
	c      Config
	client *http.Client
	clock  clock.Clock

	mu sync.Mutex
	// groups holds, per receiver and group key, the events PagerDuty
	// accepted for the group's state not yet delivered whole.
	groups map[string]*accepted
}

// accepted is the last event PagerDuty accepted for each dedup key of a
// group, with the time of the latest one.
type accepted struct {
	at   time.Time
	last map[string]string // dedup key -> action and event hash
}

// New validates c; client nil uses a default client.
func New(c Config, client *http.Client) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Source == "" {
		c.Source = "governor"
	}
	return &Notifier{c: c, client: client, clock: clock.Real{}, groups: map[string]*accepted{}}, nil
}

// Build renders the events of a message.
func (n *Notifier) Build(m *notify.Message) []Event {
	out := make([]Event, 0, len(m.Alerts))
	for _, a := range m.Alerts {
		e := Event{RoutingKey: n.c.RoutingKey, DedupKey: a.Fingerprint}
		switch {
		case a.Status == notify.StatusResolved:
			e.EventAction = "resolve"
		case m.Kind == notify.KindAcknowledge:
			e.EventAction = "acknowledge"
		default:
			e.EventAction = "trigger"
			summary := a.Annotations["summary"]
			if summary == "" {
				summary = a.Labels["alertname"] + " " + a.Labels.String()
			}
			summary = truncate(summary, MaxSummaryLen)
			e.Payload = &Payload{Summary: summary, Source: n.c.Source, Severity: SeverityOf(a.Severity()),
				Component: a.Labels["service"], Class: a.Labels["alertname"], CustomDetails: a.Labels}
			fit(&e)
		}
		out = append(out, e)
	}
	return out
}

// truncate cuts s to at most max characters, the last one an ellipsis.
func truncate(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit-1]) + "…"
}

// cutBytes cuts s to at most limit bytes at a character boundary, the
// last character an ellipsis, and returns how many bytes of s were cut.
func cutBytes(s string, limit int) (string, int) {
	if len(s) <= limit {
		return s, 0
	}
	end := max(limit-len("…"), 0)
	for end > 0 && end < len(s) && s[end]&0xC0 == 0x80 {
		end-- // inside a UTF-8 sequence
	}
	return s[:end] + "…", len(s) - end
}

func size(e *Event) int {
	b, _ := json.Marshal(e)
	return len(b)
}

// fit cuts the custom_details values of a trigger event to the longest
// length at which the event fits MaxEventSize, and notes the cut in
// TruncatedKey. Should the details' keys alone be too large, they are
// dropped with the note, and the component and class are cut too.
func fit(e *Event) {
	if size(e) <= MaxEventSize {
		return
	}
	orig := e.Payload.CustomDetails
	apply := func(limit int) {
		d := make(map[string]string, len(orig)+1)
		cut := 0
		for k, v := range orig {
			var c int
			d[k], c = cutBytes(v, limit)
			cut += c
		}
		d[TruncatedKey] = fmt.Sprintf("%d bytes cut from custom_details values: PagerDuty refuses events over %d bytes", cut, MaxEventSize)
		e.Payload.CustomDetails = d
	}
	longest := 0
	for _, v := range orig {
		longest = max(longest, len(v))
	}
	// Binary search for the largest limit that fits.
	lo, hi := 0, longest
	for lo < hi {
		mid := (lo + hi + 1) / 2
		apply(mid)
		if size(e) <= MaxEventSize {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	apply(lo)
	if size(e) <= MaxEventSize {
		return
	}
	cut := 0
	for k, v := range orig {
		cut += len(k) + len(v)
	}
	e.Payload.CustomDetails = map[string]string{TruncatedKey: fmt.Sprintf(
		"all %d custom_details (%d bytes) dropped: PagerDuty refuses events over %d bytes", len(orig), cut, MaxEventSize)}
	e.Payload.Component = truncate(e.Payload.Component, MaxSummaryLen)
	e.Payload.Class = truncate(e.Payload.Class, MaxSummaryLen)
}

// fingerprint identifies an event's action and content.
func fingerprint(e Event) string {
	b, _ := json.Marshal(e)
	h := sha256.Sum256(b)
	return e.EventAction + ":" + hex.EncodeToString(h[:16])
}

// sent reports whether the event is the last one PagerDuty accepted for
// its dedup key in the group.
func (n *Notifier) sent(group, dedupKey, fp string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	g := n.groups[group]
	return g != nil && g.last[dedupKey] == fp
}

// remember records an accepted event.
func (n *Notifier) remember(group, dedupKey, fp string, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	g := n.groups[group]
	if g == nil {
		g = &accepted{last: map[string]string{}}
		n.groups[group] = g
	}
	g.at = now
	g.last[dedupKey] = fp
}

// settle forgets the group once its state was delivered whole, and the
// groups whose memory is older than AcceptedTTL.
func (n *Notifier) settle(group string, whole bool, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if whole {
		delete(n.groups, group)
	}
	maps.DeleteFunc(n.groups, func(_ string, g *accepted) bool { return now.Sub(g.at) > AcceptedTTL })
}

// Notify implements notify.Notifier. Every event is sent, in order,
// except those PagerDuty already accepted for the group's state (see the
// package doc). After a failed event that is worth a retry, the later
// events with the same dedup_key wait for the retry, so that PagerDuty
// applies each alert's events in order. A 429 ends the attempt at once,
// with its Retry-After for the queue (notify.StatusError): resending would
// use up PagerDuty's window again. So does the attempt's deadline coming
// near: the attempt stops before the next event would not fit in it. An
// attempt that got events accepted and left others reports
// notify.ErrPartial with retry true.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	evs := n.Build(m)
	group := m.Receiver + "\x00" + m.GroupKey
	var (
		errs     []error
		retry    bool
		progress int
		stopped  error
		slowest  time.Duration
	)
	held := map[string]bool{} // dedup keys whose earlier event failed and is retried
	left := 0
	for _, e := range evs {
		fp := fingerprint(e)
		if n.sent(group, e.DedupKey, fp) {
			continue
		}
		if held[e.DedupKey] || stopped != nil {
			left++
			continue
		}
		start := n.clock.Now()
		if dl, ok := ctx.Deadline(); ok && progress > 0 && dl.Sub(start) < 2*slowest {
			stopped = fmt.Errorf("%w: attempt deadline near", notify.ErrDelivery)
			left++
			continue
		}
		r, err := notify.PostJSON(ctx, n.client, n.c.URL, nil, e)
		now := n.clock.Now()
		slowest = max(slowest, now.Sub(start))
		var se *notify.StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusTooManyRequests {
			// Rate limited: the later events would be refused too. The
			// 429 comes first, for the queue to find its Retry-After.
			stopped, retry = err, true
			left++
			continue
		}
		if err != nil && ctx.Err() != nil {
			// The attempt's deadline or the queue's close: the later
			// events would fail the same way.
			stopped, retry = err, true
			left++
			continue
		}
		if err != nil {
			retry = retry || r
			errs = append(errs, err)
			left++
			if r {
				held[e.DedupKey] = true
			}
			continue
		}
		n.remember(group, e.DedupKey, fp, now)
		progress++
	}
	n.settle(group, left == 0, n.clock.Now())
	if stopped != nil {
		errs = append([]error{stopped}, errs...)
		retry = true
	}
	if len(errs) == 0 {
		return false, nil
	}
	if retry && progress > 0 {
		errs = append(errs, fmt.Errorf("%w: %d events accepted, %d left of %d", notify.ErrPartial, progress, left, len(evs)))
	}
	return retry, errors.Join(errs...)
}
