// Package notifytest holds a sample message for the receivers' and the stores' tests.
package notifytest

import (
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// Sample returns a message with one firing P0 and one resolved P1 alert of
// service "checkout", for the integrations' tests and examples.
func Sample(kind notify.Kind) *notify.Message {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	mk := func(name, sev, status string, ends time.Time) notify.Alert {
		l := alerts.Labels{"alertname": name, "service": "checkout", "severity": sev}
		return notify.Alert{Alert: alerts.Alert{Labels: l, Annotations: map[string]string{"summary": name + " on checkout"},
			StartsAt: t0, EndsAt: ends, GeneratorURL: "governor://alerts/rules/" + name}, Status: status, Fingerprint: l.Fingerprint().String()}
	}
	as := []notify.Alert{mk("Shed", "P0", notify.StatusFiring, time.Time{}), mk("Load", "P1", notify.StatusResolved, t0.Add(time.Minute))}
	m := notify.NewMessage(kind, "team", `{}/{service="checkout"}:{service="checkout"}`, alerts.Labels{"service": "checkout"}, as, t0)
	m.ID = "n1"
	return m
}

// SampleResolved returns Sample's message with its resolved alert only: a
// group whose alerts all resolved.
func SampleResolved(kind notify.Kind) *notify.Message {
	s := Sample(kind)
	m := notify.NewMessage(kind, s.Receiver, s.GroupKey, s.GroupLabels, s.Alerts[1:], s.CreatedAt)
	m.ID = "n2"
	return m
}
