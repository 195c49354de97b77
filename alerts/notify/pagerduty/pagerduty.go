// Package pagerduty sends PagerDuty Events API v2 events: one per alert,
// deduplicated by the alert fingerprint, with trigger, acknowledge and
// resolve actions and severity critical / error / warning for P0 / P1 / P2.
package pagerduty

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
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

	// accepted holds, for the message being delivered (its queue retries
	// one message at a time), which of its events PagerDuty has accepted.
	mu       sync.Mutex
	last     *notify.Message
	accepted []bool
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
	return &Notifier{c: c, client: client}, nil
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

// Notify implements notify.Notifier. Every event is sent, in order; after
// a failed one, the later events with the same dedup_key wait for the
// retry, so that PagerDuty applies each alert's events in order. A retry of
// the same message sends only the events not accepted yet: under
// PagerDuty's rate limit (429), resending the accepted ones would use up
// the window again and the message would never get through. A 429 ends the
// attempt at once, with its Retry-After for the queue (notify.StatusError).
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	evs := n.Build(m)
	n.mu.Lock()
	if n.last != m || len(n.accepted) != len(evs) {
		n.last, n.accepted = m, make([]bool, len(evs))
	}
	accepted := n.accepted
	n.mu.Unlock()
	var errs []error
	retry := false
	failed := map[string]bool{} // dedup keys whose earlier event failed
	for i, e := range evs {
		n.mu.Lock()
		done := accepted[i]
		n.mu.Unlock()
		if done || failed[e.DedupKey] {
			continue
		}
		r, err := notify.PostJSON(ctx, n.client, n.c.URL, nil, e)
		var se *notify.StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusTooManyRequests {
			// Rate limited: the later events would be refused too, and
			// each would use up the window again. The retry, after the
			// wait PagerDuty asked for, sends them. The 429 comes first,
			// for the queue to find its Retry-After.
			return true, errors.Join(append([]error{err}, errs...)...)
		}
		if err != nil {
			retry = retry || r
			errs = append(errs, err)
			failed[e.DedupKey] = true
			continue
		}
		n.mu.Lock()
		accepted[i] = true
		n.mu.Unlock()
	}
	if len(errs) == 0 {
		n.mu.Lock()
		if n.last == m {
			n.last, n.accepted = nil, nil
		}
		n.mu.Unlock()
	}
	return retry, errors.Join(errs...)
}
