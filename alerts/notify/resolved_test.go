package notify_test

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

// recorder is a receiver of any kind: it records what it is sent.
type recorder struct{ got []*notify.Message }

func (r *recorder) Notify(_ context.Context, m *notify.Message) (bool, error) {
	r.got = append(r.got, m)
	return false, nil
}

type closingRecorder struct {
	recorder
	closed int
}

func (c *closingRecorder) Close() { c.closed++ }

type resendingRecorder struct{ recorder }

func (*resendingRecorder) ResendInterval() time.Duration { return time.Minute }

// TestFilterResolvedAppliesSendResolvedToAnyReceiver: send_resolved false
// keeps a message of resolved alerts only from the receiver, which is
// reported delivered, and hands it the firing alerts of a message that has
// both; omitted or true, the receiver is used as it is. A receiver that is
// a Closer or a Resender stays one.
func TestFilterResolvedAppliesSendResolvedToAnyReceiver(t *testing.T) {
	off, on := false, true
	for _, setting := range []*bool{nil, &on} {
		r := &recorder{}
		if got := notify.FilterResolved(r, setting); got != notify.Notifier(r) {
			t.Fatalf("send_resolved %v: the receiver is wrapped: %T", setting, got)
		}
	}
	r := &recorder{}
	n := notify.FilterResolved(r, &off)
	if retry, err := n.Notify(context.Background(), notifytest.SampleResolved(notify.KindNotify)); retry || err != nil || len(r.got) != 0 {
		t.Fatalf("resolved-only message: retry %v, err %v, receiver sent %d", retry, err, len(r.got))
	}
	mixed := notifytest.Sample(notify.KindNotify)
	if _, err := n.Notify(context.Background(), mixed); err != nil || len(r.got) != 1 {
		t.Fatalf("mixed message: err %v, receiver sent %d", err, len(r.got))
	}
	if m := r.got[0]; len(m.Alerts) != 1 || m.Alerts[0].Status != notify.StatusFiring || m.Status != notify.StatusFiring || m.ID != mixed.ID {
		t.Fatalf("mixed message reached the receiver as %+v", m)
	}
	firing := notify.NewMessage(notify.KindNotify, mixed.Receiver, mixed.GroupKey, mixed.GroupLabels, mixed.Alerts[:1], mixed.CreatedAt)
	if _, err := n.Notify(context.Background(), firing); err != nil || len(r.got) != 2 || r.got[1] != firing {
		t.Fatalf("firing message: err %v, not passed as is", err)
	}

	c := &closingRecorder{}
	cn, ok := notify.FilterResolved(c, &off).(notify.Closer)
	if !ok {
		t.Fatal("a Closer is no longer one")
	}
	cn.Close()
	if c.closed != 1 {
		t.Fatalf("Close reached the receiver %d times", c.closed)
	}
	if _, ok := n.(notify.Resender); ok {
		t.Fatal("a receiver that is not a Resender became one")
	}
	rs, ok := notify.FilterResolved(&resendingRecorder{}, &off).(notify.Resender)
	if !ok || rs.ResendInterval() != time.Minute {
		t.Fatalf("a Resender is no longer one (%v) or lost its interval", ok)
	}
	n.(notify.Closer).Close() // not a Closer underneath: nothing to close
}
