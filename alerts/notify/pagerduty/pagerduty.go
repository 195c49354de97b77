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
// Events are paced ahead of PagerDuty's rate limit per routing key by a
// token bucket that every group and receiver of the process using the key
// shares (see Notify): a storm is spread over the minutes it needs instead
// of drawing 429s, no event is dropped for it (an attempt that the bucket
// holds back whole reports notify.ErrNotAttempted, which uses up none of
// the queue's attempts), and P0 events keep room in the bucket and go
// first in their group.
//
// A trigger carries the alert's labels and, under "annotations", its
// annotations in custom_details, and links to its runbook (annotation
// runbook_url) and source when they are http(s) URLs.
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
	"slices"
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
	// EventsPerMinute is PagerDuty's rate limit for the routing key;
	// default DefaultEventsPerMinute. Events are paced to stay within it
	// in any minute, across every receiver of the process that uses the
	// key; when those receivers name different limits, the lowest applies
	// (see Notify).
	EventsPerMinute int `json:"events_per_minute,omitempty"`
	// SendResolved false sends no resolved alerts, as Alertmanager's
	// send_resolved: a message of resolved alerts only is not sent, and one
	// with firing alerts too carries the firing ones. It is applied where
	// the receivers are built (notify.FilterResolved, as alerts/config
	// does); New leaves it to that. No resolve event is then sent: an
	// incident stays open until it is resolved in PagerDuty. Omitted: true.
	SendResolved *bool `json:"send_resolved,omitempty"`
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if c.RoutingKey == "" {
		return fmt.Errorf("%w: pagerduty: routing_key must not be empty", alerts.ErrInvalid)
	}
	if c.EventsPerMinute < 0 {
		return fmt.Errorf("%w: pagerduty: events_per_minute must not be negative, got %d; omit it for PagerDuty's %d",
			alerts.ErrInvalid, c.EventsPerMinute, DefaultEventsPerMinute)
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
	// Links of a trigger: the alert's runbook (annotation runbook_url)
	// and its source (the alert's generator URL), when http(s). PagerDuty
	// shows them on the incident.
	Links []Link `json:"links,omitempty"`
}

// Link is a link shown on a PagerDuty incident.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text,omitempty"`
}

// Payload describes a triggered alert.
type Payload struct {
	Summary   string `json:"summary"`
	Source    string `json:"source"`
	Severity  string `json:"severity"`
	Component string `json:"component,omitempty"`
	Class     string `json:"class,omitempty"`
	// CustomDetails holds the alert's labels, each at the top level as
	// before (PagerDuty event rules match on them), and its annotations
	// as an object under AnnotationsKey (under "governor_annotations"
	// should a label be named "annotations").
	CustomDetails map[string]any `json:"custom_details,omitempty"`
}

// AnnotationsKey is the custom_details entry that holds an alert's
// annotations (summary, description, runbook_url, ...).
const AnnotationsKey = "annotations"

// RunbookAnnotation is the annotation whose URL becomes the incident's
// "Runbook" link, as in the built-in rules.
const RunbookAnnotation = "runbook_url"

// MaxSummaryLen is the longest summary PagerDuty accepts, in characters: a
// longer one makes it refuse the event (400 "'summary' is too long"), so
// Build truncates it.
const MaxSummaryLen = 1024

// MaxEventSize is the largest event PagerDuty accepts, in bytes of JSON
// (512 KB): a larger one gets a final 400, so Build cuts the label and
// annotation values of custom_details until the event fits and says so in
// TruncatedKey.
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
	// sleep waits for a paced event's slot; tests make it advance a
	// fake clock.
	sleep func(context.Context, time.Duration) error
	mu    sync.Mutex
	// pace is the token bucket of the routing key, acquired at the first
	// Notify and released by Close (see acquire).
	pace *pacer
	// groups holds, per receiver and group key, the events PagerDuty
	// accepted for the group's state not yet delivered whole.
	groups map[string]*accepted
	// latency is the slowest request of the last attempt that made one,
	// what the next attempt expects of its first request.
	latency time.Duration
}

// minRequestTime is the least time a request is expected to take: an
// event is not sent when less than twice that is left before the
// attempt's deadline, as it would be cut by the deadline and use up one of
// the queue's attempts.
const minRequestTime = 500 * time.Millisecond

// accepted holds the events PagerDuty accepted for each dedup key of a
// group, by their place among the key's events in the message, with the
// time of the latest one. A key with two events in one message (the old
// episode's resolve and the new trigger) is skipped event by event: a
// retry that finds the resolve accepted must not send the trigger before
// it again, which would page for the old episode.
type accepted struct {
	at   time.Time
	seen map[string][]string // dedup key -> action and event hash, in order
}

// New validates c; client nil uses a default client. Redirects are not
// followed (see notify.NoRedirects).
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
	if c.EventsPerMinute == 0 {
		c.EventsPerMinute = DefaultEventsPerMinute
	}
	n := &Notifier{c: c, client: notify.NoRedirects(client), clock: clock.Real{}, groups: map[string]*accepted{}}
	n.sleep = n.sleepClock
	return n, nil
}

// pacer returns the routing key's bucket, which the notifier takes a
// share of at its first use: a notifier built but never used, as by a
// configuration that fails to apply, does not pace the key.
func (n *Notifier) pacer() *pacer {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pace == nil {
		n.pace = acquire(n.c.URL, n.c.RoutingKey, n.c.EventsPerMinute, n.clock.Now())
	}
	return n.pace
}

// Close gives back the notifier's share of its routing key's bucket: its
// events_per_minute no longer counts towards the key's limit, and the
// bucket is forgotten once no notifier uses it and it has refilled.
// The receiver queue calls it when it stops, after the last Notify; a
// later Notify takes a share again.
func (n *Notifier) Close() {
	n.mu.Lock()
	p := n.pace
	n.pace = nil
	n.mu.Unlock()
	if p != nil {
		p.release(n.c.EventsPerMinute)
	}
}

// sleepClock waits d on the notifier's clock, or until ctx ends.
func (n *Notifier) sleepClock(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, n.clock, d)
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
				Component: a.Labels["service"], Class: a.Labels["alertname"]}
			e.Links = links(a)
			fit(&e, a.Labels, a.Annotations)
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

// links returns the incident links of a firing alert: its runbook and
// its source, each only when an http(s) URL (PagerDuty shows others as
// dead links; they stay readable in the annotations).
func links(a notify.Alert) []Link {
	var out []Link
	if u := a.Annotations[RunbookAnnotation]; notify.ValidateURL(RunbookAnnotation, u) == nil {
		out = append(out, Link{Href: u, Text: "Runbook"})
	}
	if u := a.GeneratorURL; notify.ValidateURL("generator_url", u) == nil {
		out = append(out, Link{Href: u, Text: "Alert source"})
	}
	return out
}

// details renders custom_details from the labels and annotations, each
// value cut to at most limit bytes (limit < 0: whole), and returns the
// bytes cut.
func details(labels, annotations map[string]string, limit int) (map[string]any, int) {
	d := make(map[string]any, len(labels)+2)
	cut := 0
	for k, v := range labels {
		if limit >= 0 {
			var c int
			v, c = cutBytes(v, limit)
			cut += c
		}
		d[k] = v
	}
	if len(annotations) > 0 {
		ann := make(map[string]string, len(annotations))
		for k, v := range annotations {
			if limit >= 0 {
				var c int
				v, c = cutBytes(v, limit)
				cut += c
			}
			ann[k] = v
		}
		key := AnnotationsKey
		if _, ok := labels[AnnotationsKey]; ok {
			key = "governor_" + AnnotationsKey
		}
		d[key] = ann
	}
	return d, cut
}

// fit sets the custom_details of a trigger event from the labels and
// annotations, cutting their values to the longest length at which the
// event fits MaxEventSize, and notes the cut in TruncatedKey. Should the
// keys alone be too large, the details are dropped with the note and the
// component and class are cut too; should even that not fit (a runbook
// URL of hundreds of KB), the links are dropped as well.
func fit(e *Event, labels, annotations map[string]string) {
	e.Payload.CustomDetails, _ = details(labels, annotations, -1)
	if len(e.Payload.CustomDetails) == 0 {
		e.Payload.CustomDetails = nil
	}
	if size(e) <= MaxEventSize {
		return
	}
	apply := func(limit int) {
		d, cut := details(labels, annotations, limit)
		d[TruncatedKey] = fmt.Sprintf("%d bytes cut from custom_details values: PagerDuty refuses events over %d bytes", cut, MaxEventSize)
		e.Payload.CustomDetails = d
	}
	longest := 0
	for _, v := range labels {
		longest = max(longest, len(v))
	}
	for _, v := range annotations {
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
	for k, v := range labels {
		cut += len(k) + len(v)
	}
	for k, v := range annotations {
		cut += len(k) + len(v)
	}
	e.Payload.CustomDetails = map[string]any{TruncatedKey: fmt.Sprintf(
		"all %d labels and %d annotations (%d bytes) dropped from custom_details: PagerDuty refuses events over %d bytes",
		len(labels), len(annotations), cut, MaxEventSize)}
	e.Payload.Component = truncate(e.Payload.Component, MaxSummaryLen)
	e.Payload.Class = truncate(e.Payload.Class, MaxSummaryLen)
	if size(e) > MaxEventSize {
		e.Links = nil
	}
}

// requestTime is what the next request of an attempt of the given length
// is expected to take: the slowest of the attempt so far, else the slowest
// of the notifier's last attempt that made one, and at least
// minRequestTime. An attempt keeps twice that before its deadline. A time
// not measured in this attempt counts for at most a quarter of it, so
// that one slow request never keeps a whole attempt from sending.
func (n *Notifier) requestTime(slowest, attempt time.Duration) time.Duration {
	if slowest > 0 {
		return max(slowest, minRequestTime)
	}
	n.mu.Lock()
	last := n.latency
	n.mu.Unlock()
	return min(max(last, minRequestTime), attempt/4)
}

// fingerprint identifies an event's action and content.
func fingerprint(e Event) string {
	b, _ := json.Marshal(e)
	h := sha256.Sum256(b)
	return e.EventAction + ":" + hex.EncodeToString(h[:16])
}

// sent reports whether PagerDuty accepted the event as the nth (from 0)
// event of its dedup key in the group's state.
func (n *Notifier) sent(group, dedupKey string, nth int, fp string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	g := n.groups[group]
	if g == nil {
		return false
	}
	seen := g.seen[dedupKey]
	return nth < len(seen) && seen[nth] == fp
}

// remember records an accepted event, the nth of its dedup key; the
// key's later events accepted before, for another state, no longer count.
func (n *Notifier) remember(group, dedupKey string, nth int, fp string, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	g := n.groups[group]
	if g == nil {
		g = &accepted{seen: map[string][]string{}}
		n.groups[group] = g
	}
	g.at = now
	seen := g.seen[dedupKey]
	g.seen[dedupKey] = append(seen[:min(nth, len(seen))], fp)
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

// Notify implements notify.Notifier. Every event is sent, except those
// PagerDuty already accepted for the group's state (see the package doc),
// the events of P0 alerts first and otherwise in order; each alert's own
// events keep their order.
//
// Events are paced by the routing key's token bucket (DefaultEventsPerMinute,
// or Config.EventsPerMinute, in any minute), which every group and every
// receiver of the process using the key shares, at the lowest limit of the
// notifiers that have sent with the key and not been closed (Close), so a
// storm waits its turn
// instead of drawing 429s; P1 and P2 events leave part of the bucket to P0
// ones, so a page goes out at once during a storm of lesser alerts. An
// event whose slot is past the attempt's deadline ends the attempt: with
// progress as notify.ErrPartial; when the attempt sent no request at all,
// as notify.ErrNotAttempted with a *notify.StatusError whose Retry-After
// is the slot, so that the queue waits for the slot without counting a
// failed attempt (a contended key or another receiver's Retry-After must
// not make the queue give a page up).
//
// After a failed event that is worth a retry, the later events with the
// same dedup_key wait for the retry, so that PagerDuty applies each
// alert's events in order. A 429 ends the attempt at once, with its
// Retry-After for the queue (notify.StatusError), and holds back every
// sender of the routing key until then. So does the attempt's deadline
// coming near: the attempt stops before the next event would not fit in
// it, that is when less than twice the time a request takes (see
// requestTime) is left; and an event whose slot in the bucket leaves less
// than that waits for the next attempt rather than start a request that
// the deadline would cut. An attempt that got events accepted and left
// others reports notify.ErrPartial with retry true.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	evs := n.Build(m)
	urgent := urgentFirst(m, evs)
	pace := n.pacer()
	group := m.Receiver + "\x00" + m.GroupKey
	var (
		errs     []error
		retry    bool
		progress int
		stopped  error
		paced    bool // stopped by the routing key's bucket, before a request
		slowest  time.Duration
	)
	held := map[string]bool{} // dedup keys whose earlier event failed and is retried
	nth := map[string]int{}   // events of each dedup key so far
	left := 0
	dl, hasDeadline := ctx.Deadline()
	attempt := dl.Sub(n.clock.Now()) // unused without a deadline
	for i, e := range evs {
		fp := fingerprint(e)
		k := nth[e.DedupKey]
		nth[e.DedupKey]++
		if n.sent(group, e.DedupKey, k, fp) {
			continue
		}
		if held[e.DedupKey] || stopped != nil {
			left++
			continue
		}
		start := n.clock.Now()
		margin := 2 * n.requestTime(slowest, attempt)
		if hasDeadline && progress > 0 && dl.Sub(start) < margin {
			stopped = fmt.Errorf("%w: attempt deadline near", notify.ErrDelivery)
			left++
			continue
		}
		// The event's slot must leave its request the time it needs
		// before the deadline, or the request would be cut and the
		// attempt used up: the event waits for the next attempt.
		var by time.Time
		if hasDeadline {
			by = dl.Add(-margin)
		}
		slot, ok := pace.reserve(start, by, urgent[i])
		if !ok {
			stopped = &notify.StatusError{StatusCode: http.StatusTooManyRequests, RetryAt: slot}
			stopped = fmt.Errorf("pagerduty: held back ahead of PagerDuty's rate limit of %d events per minute for the routing key "+
				"until %s, past the attempt's deadline; no request sent: %w", pace.limit(), slot.UTC().Format(time.RFC3339), stopped)
			paced = true
			left++
			continue
		}
		if err := n.sleep(ctx, slot.Sub(start)); err != nil {
			stopped = fmt.Errorf("%w: waiting for the routing key's rate limit: %v", notify.ErrDelivery, err)
			left++
			continue
		}
		start = n.clock.Now()
		r, err := notify.PostJSON(ctx, n.client, n.c.URL, nil, e)
		now := n.clock.Now()
		slowest = max(slowest, now.Sub(start))
		var se *notify.StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusTooManyRequests {
			// Rate limited: the later events would be refused too, and
			// so would those of every other sender of the key. The 429
			// comes first, for the queue to find its Retry-After.
			pace.refused(now, se.Wait(now))
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
		n.remember(group, e.DedupKey, k, fp, now)
		progress++
	}
	n.settle(group, left == 0, n.clock.Now())
	if slowest > 0 {
		n.mu.Lock()
		n.latency = slowest
		n.mu.Unlock()
	}
	if paced && progress == 0 && len(errs) == 0 {
		// No request went out: nothing failed, the slot is the time to try.
		return true, fmt.Errorf("%w: %w", notify.ErrNotAttempted, stopped)
	}
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

// urgentFirst moves the events of P0 alerts ahead of the others, keeping
// the order within each, and reports which events are of P0 alerts. An
// alert's events all have its dedup key and severity label, so they keep
// their order: a resolve never overtakes its trigger. Should a dedup key
// carry events of more than one severity, nothing is moved.
func urgentFirst(m *notify.Message, evs []Event) []bool {
	urgent := make([]bool, len(evs))
	sev := make(map[string]bool, len(evs))
	some := false
	for i, a := range m.Alerts {
		urgent[i] = a.Severity() == alerts.P0
		if was, ok := sev[a.Fingerprint]; ok && was != urgent[i] {
			return urgent
		}
		sev[a.Fingerprint] = urgent[i]
		some = some || urgent[i]
	}
	if !some {
		return urgent
	}
	idx := make([]int, len(evs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case urgent[a] == urgent[b]:
			return 0
		case urgent[a]:
			return -1
		}
		return 1
	})
	sorted := make([]Event, len(evs))
	su := make([]bool, len(evs))
	for i, j := range idx {
		sorted[i], su[i] = evs[j], urgent[j]
	}
	copy(evs, sorted)
	return su
}
