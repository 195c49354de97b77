// Package pagerduty sends PagerDuty Events API v2 events: one per alert,
// deduplicated by the alert fingerprint, with trigger, acknowledge and
// resolve actions and severity critical / error / warning for P0 / P1 / P2.
package pagerduty

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
			e.Payload = &Payload{Summary: summary, Source: n.c.Source, Severity: SeverityOf(a.Severity()),
				Component: a.Labels["service"], Class: a.Labels["alertname"], CustomDetails: a.Labels}
		}
		out = append(out, e)
	}
	return out
}

// Notify implements notify.Notifier. Every event is sent; a failure is
// retried as a whole (PagerDuty deduplicates by dedup_key).
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	var errs []error
	retry := false
	for _, e := range n.Build(m) {
		r, err := notify.PostJSON(ctx, n.client, n.c.URL, nil, e)
		if err != nil {
			retry = retry || r
			errs = append(errs, err)
		}
	}
	return retry, errors.Join(errs...)
}
