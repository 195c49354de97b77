package notify

import (
	"context"
	"time"
)

// FilterResolved applies a receiver's send_resolved setting to its
// notifier n, whatever the kind of receiver, as Alertmanager does: n
// itself when the setting sends resolves (omitted or true); otherwise a
// Notifier that hands n each message's WithoutResolved, so that n gets
// the firing alerts of a message that has both, and that reports success
// without calling n for a message of resolved alerts only. The receivers
// are built with it (alerts/config); their own New ignores the setting.
//
// The Notifier returned is a Closer that closes n when n is one, and a
// Resender when n is one.
func FilterResolved(n Notifier, setting *bool) Notifier {
	if SendsResolved(setting) {
		return n
	}
	f := withoutResolved{n: n}
	if r, ok := n.(Resender); ok {
		return resenderWithoutResolved{withoutResolved: f, r: r}
	}
	return f
}

// withoutResolved is the Notifier of a receiver with send_resolved false.
type withoutResolved struct{ n Notifier }

var (
	_ Closer   = withoutResolved{}
	_ Resender = resenderWithoutResolved{}
)

// Notify passes n the message without its resolved alerts.
func (w withoutResolved) Notify(ctx context.Context, m *Message) (bool, error) {
	if m = m.WithoutResolved(); m == nil {
		return false, nil
	}
	return w.n.Notify(ctx, m)
}

// Close closes n when n is a Closer.
func (w withoutResolved) Close() {
	if c, ok := w.n.(Closer); ok {
		c.Close()
	}
}

// resenderWithoutResolved is withoutResolved for a Resender.
type resenderWithoutResolved struct {
	withoutResolved
	r Resender
}

// ResendInterval is n's.
func (w resenderWithoutResolved) ResendInterval() time.Duration { return w.r.ResendInterval() }
