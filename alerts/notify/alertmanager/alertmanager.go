// Package alertmanager forwards alerts to an Alertmanager through its API
// (POST /api/v2/alerts), so teams that route through Alertmanager keep their
// routing, silences and receivers.
package alertmanager

import (
	"context"
	"net/http"
	"strings"
	"time"

	"governor.dev/governor/alerts/notify"
)

// Config of an Alertmanager receiver: its base URL, e.g. http://am:9093.
type Config struct {
	URL string `json:"url"`
}

// Validate refuses a URL that is not http(s).
func (c Config) Validate() error { return notify.ValidateURL("alertmanager: url", c.URL) }

// PostableAlert is one element of the API request body.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

var _ notify.Notifier = (*Notifier)(nil)

// Notifier posts alerts.
type Notifier struct {
	url    string
	client *http.Client
}

// New validates c; client nil uses a default client.
func New(c Config, client *http.Client) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{url: strings.TrimRight(c.URL, "/") + "/api/v2/alerts", client: client}, nil
}

// Build renders the API body: firing alerts without an end, resolved ones
// with their end time so Alertmanager resolves them.
func Build(m *notify.Message) []PostableAlert {
	out := make([]PostableAlert, 0, len(m.Alerts))
	for _, a := range m.Alerts {
		p := PostableAlert{Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, GeneratorURL: a.GeneratorURL}
		if a.Status == notify.StatusResolved {
			p.EndsAt = a.EndsAt
		}
		out = append(out, p)
	}
	return out
}

// Notify implements notify.Notifier; acknowledgements are skipped
// (Alertmanager has none).
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	if m.Kind == notify.KindAcknowledge {
		return false, nil
	}
	return notify.PostJSON(ctx, n.client, n.url, nil, Build(m))
}
