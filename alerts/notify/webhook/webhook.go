// Package webhook posts Alertmanager's webhook payload (version "4") so that
// receivers written for Alertmanager work unchanged.
package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// Config of a webhook receiver.
type Config struct {
	URL string `json:"url"`
	// MaxAlerts truncates the alert list of a message to its first
	// MaxAlerts alerts, the payload's truncatedAlerts counting the rest, as
	// Alertmanager's max_alerts (0: no limit, its default). A receiver that
	// bounds its request body needs it: a group of thousands of alerts is
	// megabytes.
	MaxAlerts int `json:"max_alerts,omitempty"`
	// SendResolved false sends no resolved alerts, as Alertmanager's
	// send_resolved: a message of resolved alerts only is not sent, and one
	// with firing alerts too carries the firing ones. It is applied where
	// the receivers are built (notify.FilterResolved, as alerts/config
	// does); New leaves it to that. Omitted: true.
	SendResolved *bool `json:"send_resolved,omitempty"`
}

// Validate refuses a URL that is not http(s).
func (c Config) Validate() error {
	if c.MaxAlerts < 0 {
		return fmt.Errorf("%w: webhook: max_alerts must not be negative", alerts.ErrInvalid)
	}
	return notify.ValidateURL("webhook: url", c.URL)
}

// Payload is Alertmanager's webhook message, version 4.
type Payload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
}

// Alert is one alert of the payload.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

var _ notify.Notifier = (*Notifier)(nil)

// Notifier posts payloads.
type Notifier struct {
	c      Config
	client *http.Client
}

// New validates c; client nil uses a default client. Redirects are not
// followed (see notify.NoRedirects).
func New(c Config, client *http.Client) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{c: c, client: notify.NoRedirects(client)}, nil
}

// Build renders the payload of a message.
func Build(m *notify.Message, maxAlerts int) Payload {
	p := Payload{Version: "4", GroupKey: m.GroupKey, Status: m.Status, Receiver: m.Receiver,
		GroupLabels: orEmpty(m.GroupLabels), CommonLabels: orEmpty(m.CommonLabels),
		CommonAnnotations: orEmpty(m.CommonAnnotations), ExternalURL: m.ExternalURL, Alerts: []Alert{}}
	for i, a := range m.Alerts {
		if maxAlerts > 0 && i >= maxAlerts {
			p.TruncatedAlerts = len(m.Alerts) - maxAlerts
			break
		}
		p.Alerts = append(p.Alerts, Alert{Status: a.Status, Labels: orEmpty(a.Labels), Annotations: orEmpty(a.Annotations),
			StartsAt: a.StartsAt, EndsAt: a.EndsAt, GeneratorURL: a.GeneratorURL, Fingerprint: a.Fingerprint})
	}
	return p
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Notify implements notify.Notifier. Acknowledgements are not part of the
// webhook format and are skipped.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	if m.Kind == notify.KindAcknowledge {
		return false, nil
	}
	return notify.PostJSON(ctx, n.client, n.c.URL, nil, Build(m, n.c.MaxAlerts))
}
