// Package alertmanager forwards alerts to an Alertmanager through its API
// (POST /api/v2/alerts), so teams that route through Alertmanager keep their
// routing, silences and receivers.
package alertmanager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/sdk/clock"
)

// DefaultResendInterval is the resend interval of Config, Prometheus's
// default resend delay.
const DefaultResendInterval = time.Minute

// Config of an Alertmanager receiver.
type Config struct {
	// URL is the base URL, e.g. http://am:9093.
	URL string `json:"url"`
	// ResendInterval, a Go duration string (default "1m"), is how often
	// the firing alerts are posted again. Each is posted with an end 4
	// intervals ahead: Alertmanager resolves an alert that is not posted
	// again before its end (without one, after its resolve_timeout, 5m by
	// default), so the alerts are posted again well within it, whatever
	// the repeat interval of their tier.
	ResendInterval string `json:"resend_interval,omitempty"`
	// SendResolved may only be true (or omitted): Alertmanager must hear
	// that an alert resolved to end it at once, and decides itself, by
	// the send_resolved of its own receivers, who hears of the resolve.
	SendResolved *bool `json:"send_resolved,omitempty"`
}

// Validate refuses a URL that is not http(s), a resend interval that is
// not a positive duration and send_resolved false.
func (c Config) Validate() error {
	_, err := c.resendInterval()
	var sr error
	if !notify.SendsResolved(c.SendResolved) {
		sr = fmt.Errorf("%w: alertmanager: send_resolved false is not supported: Alertmanager would keep resolved alerts "+
			"firing until they expire; set send_resolved on Alertmanager's own receivers instead", alerts.ErrInvalid)
	}
	return errors.Join(notify.ValidateURL("alertmanager: url", c.URL), err, sr)
}

func (c Config) resendInterval() (time.Duration, error) {
	if c.ResendInterval == "" {
		return DefaultResendInterval, nil
	}
	d, err := time.ParseDuration(c.ResendInterval)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: alertmanager: resend_interval %q: want a positive duration like \"1m\"", alerts.ErrInvalid, c.ResendInterval)
	}
	return d, nil
}

// PostableAlert is one element of the API request body.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

var _ notify.Resender = (*Notifier)(nil)

// Notifier posts alerts.
type Notifier struct {
	url    string
	client *http.Client
	resend time.Duration
	// clock tells the time of a post, from which firing alerts end.
	clock clock.Clock
}

// Option sets up a Notifier.
type Option func(*Notifier)

// WithClock sets the clock that tells the time of a post, from which the
// firing alerts posted end (default clock.Real); nil keeps the default.
// It is the clock of the manager that makes the messages.
func WithClock(c clock.Clock) Option {
	return func(n *Notifier) {
		if c != nil {
			n.clock = c
		}
	}
}

// New validates c; client nil uses a default client. Redirects are not
// followed (see notify.NoRedirects).
func New(c Config, client *http.Client, opts ...Option) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	resend, _ := c.resendInterval()
	n := &Notifier{url: strings.TrimRight(c.URL, "/") + "/api/v2/alerts", client: notify.NoRedirects(client), resend: resend, clock: clock.Real{}}
	for _, o := range opts {
		o(n)
	}
	return n, nil
}

// ResendInterval implements notify.Resender.
func (n *Notifier) ResendInterval() time.Duration { return n.resend }

// Build renders the API body for a post at now: firing alerts end 4
// resend intervals after now, as Prometheus does, so that Alertmanager
// keeps them firing while they are posted again and resolves them if
// Governor stops (a message delivered late, after an outage of
// Alertmanager, still posts its firing alerts as firing: an end counted
// from when the message was made would have passed, and Alertmanager
// would take a new P0 as already resolved and page nobody); resolved ones
// end at their end time so Alertmanager resolves them, or at the
// message's time (now if later) for one without an end, which would
// otherwise stay firing until resolve_timeout.
func Build(m *notify.Message, resend time.Duration, now time.Time) []PostableAlert {
	out := make([]PostableAlert, 0, len(m.Alerts))
	for _, a := range m.Alerts {
		p := PostableAlert{Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, GeneratorURL: a.GeneratorURL}
		switch {
		case a.Status != notify.StatusResolved:
			p.EndsAt = later(m.CreatedAt, now).Add(4 * resend)
		case a.EndsAt.IsZero():
			p.EndsAt = m.CreatedAt
			if p.EndsAt.IsZero() || p.EndsAt.After(now) {
				p.EndsAt = now
			}
		default:
			p.EndsAt = a.EndsAt
		}
		out = append(out, p)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Notify implements notify.Notifier; acknowledgements are skipped
// (Alertmanager has none).
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	if m.Kind == notify.KindAcknowledge {
		return false, nil
	}
	return notify.PostJSON(ctx, n.client, n.url, nil, Build(m, n.resend, n.clock.Now()))
}
