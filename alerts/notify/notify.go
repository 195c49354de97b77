package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"governor.dev/governor/alerts"
)

// ErrDelivery marks a failed delivery.
var ErrDelivery = errors.New("notify: delivery failed")

// ErrPartial marks an attempt that delivered part of a message and left
// the rest for the next attempt, e.g. a receiver that sends one request
// per alert and stopped before the attempt's deadline or at a rate limit.
// A Notifier returns it (retry true) only when the attempt made progress
// that the next attempt keeps: the queue retries such an attempt without
// counting it against QueueOptions.MaxAttempts and without back-off
// (a Retry-After still applies), so a large group gets through however
// many attempts it takes.
var ErrPartial = errors.New("notify: partly delivered")

// ErrNotAttempted marks an attempt that sent nothing to the receiver
// because the Notifier held it back itself, e.g. pacing ahead of the
// receiver's rate limit, and says when to try again: a Notifier returns it
// (retry true) wrapped together with a *StatusError whose RetryAfter or
// RetryAt is that time. The queue waits until then without counting the
// attempt against QueueOptions.MaxAttempts and without back-off, lets a
// more urgent message go first meanwhile, and gives the message up once
// it has waited QueueOptions.MaxDeferral in all for attempts not made.
// An attempt that sent anything, even a request that failed, is an
// attempt and must not return it; ErrPartial takes precedence.
var ErrNotAttempted = errors.New("notify: not attempted")

// ErrDeliveredIncomplete marks a final failure of a message that reached
// part of its destinations, e.g. a mail the relay took for some recipients
// and refused for good for the others. A Notifier returns it (retry false)
// wrapped in the error that says what was refused. The queue reports it as
// any final failure (OnResult with the error, the failed counter), but the
// message counts as delivered: the manager closes its log entry with the
// error and does not take it back from its group, which would send it
// again, at every group interval, to the destinations that got it.
var ErrDeliveredIncomplete = errors.New("notify: delivered incomplete")

// Kind says what a message reports.
type Kind string

// Message kinds.
const (
	// KindNotify reports the group's firing and resolved alerts.
	KindNotify Kind = "notify"
	// KindAcknowledge reports that a person acknowledged the alerts;
	// integrations without acknowledgements ignore it.
	KindAcknowledge Kind = "acknowledge"
	// KindResend repeats, to a Resender, the firing alerts it was notified
	// of that still fire. It is not in the notification log and changes no
	// group state.
	KindResend Kind = "resend"
)

// Status values of messages and alerts, as in Alertmanager.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Alert is one alert in a message.
type Alert struct {
	alerts.Alert
	Status      string `json:"status"`
	Fingerprint string `json:"fingerprint"`
}

// Message is one notification for a group of alerts.
type Message struct {
	// ID is the notification log entry; integrations with idempotency keys
	// use it so that a retried delivery is recognised.
	ID                string            `json:"id"`
	Kind              Kind              `json:"kind"`
	Receiver          string            `json:"receiver"`
	GroupKey          string            `json:"group_key"`
	Status            string            `json:"status"`
	Severity          alerts.Severity   `json:"severity"`
	GroupLabels       alerts.Labels     `json:"group_labels"`
	CommonLabels      alerts.Labels     `json:"common_labels"`
	CommonAnnotations map[string]string `json:"common_annotations"`
	Alerts            []Alert           `json:"alerts"`
	ExternalURL       string            `json:"external_url,omitempty"`
	CreatedAt         time.Time         `json:"created_at"`
}

// Firing returns the firing alerts of the message.
func (m *Message) Firing() []Alert {
	return slices.DeleteFunc(slices.Clone(m.Alerts), func(a Alert) bool { return a.Status != StatusFiring })
}

// WithoutResolved returns the message for a receiver configured with
// send_resolved false, as Alertmanager sends it: m itself when it reports
// no resolved alert; nil when it reports resolved alerts only, which such a
// receiver is not sent at all (its Notify reports success without sending
// anything); otherwise a copy of m with the firing alerts only, its status,
// severity and common labels and annotations worked out from them, and the
// same ID, group, kind and time. m is not changed.
func (m *Message) WithoutResolved() *Message {
	if !slices.ContainsFunc(m.Alerts, func(a Alert) bool { return a.Status == StatusResolved }) {
		return m
	}
	firing := m.Firing()
	if len(firing) == 0 {
		return nil
	}
	out := NewMessage(m.Kind, m.Receiver, m.GroupKey, m.GroupLabels, firing, m.CreatedAt)
	out.ID, out.ExternalURL = m.ID, m.ExternalURL
	return out
}

// SendsResolved reads a receiver's send_resolved setting: omitted (nil)
// means true, resolves are sent.
func SendsResolved(setting *bool) bool { return setting == nil || *setting }

// Notifier delivers a message. retry reports whether a failure is worth
// retrying (network errors, 5xx, 429) or final (4xx, bad payload).
type Notifier interface {
	Notify(ctx context.Context, m *Message) (retry bool, err error)
}

// Closer is a Notifier that holds something shared beyond itself, such as
// PagerDuty's per routing key pacing, and gives it back in Close. The
// receiver queue calls Close once, when its worker stops (retired and
// done, or closed), after the last Notify.
type Closer interface {
	Notifier
	Close()
}

// Resender is a Notifier whose receiver forgets a firing alert that is not
// posted again in time (Alertmanager resolves it at its endsAt). The manager
// sends it the firing alerts it was notified of every ResendInterval, as
// KindResend messages, besides the group notifications.
type Resender interface {
	Notifier
	ResendInterval() time.Duration
}

// NewMessage fills the status and the common labels and annotations from
// the alerts.
func NewMessage(kind Kind, receiver, groupKey string, groupLabels alerts.Labels, as []Alert, created time.Time) *Message {
	m := &Message{Kind: kind, Receiver: receiver, GroupKey: groupKey, GroupLabels: groupLabels, Alerts: as,
		Status: StatusResolved, Severity: alerts.P2, CreatedAt: created}
	for i, a := range as {
		if a.Status == StatusFiring {
			m.Status = StatusFiring
			if s := a.Severity(); s.MoreUrgent(m.Severity) {
				m.Severity = s
			}
		}
		if i == 0 {
			m.CommonLabels = a.Labels.Merge(nil)
			m.CommonAnnotations = alerts.Labels(a.Annotations).Merge(nil)
			continue
		}
		for k, v := range m.CommonLabels {
			if a.Labels[k] != v {
				delete(m.CommonLabels, k)
			}
		}
		for k, v := range m.CommonAnnotations {
			if a.Annotations[k] != v {
				delete(m.CommonAnnotations, k)
			}
		}
	}
	if m.Status == StatusResolved {
		for _, a := range as {
			if s := a.Severity(); s.MoreUrgent(m.Severity) {
				m.Severity = s
			}
		}
	}
	return m
}

// ValidateURL refuses a receiver URL that is not absolute http(s) with a host.
func ValidateURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", alerts.ErrInvalid, field, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %s: scheme %q: want http or https", alerts.ErrInvalid, field, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("%w: %s: %q has no host", alerts.ErrInvalid, field, raw)
	}
	return nil
}
