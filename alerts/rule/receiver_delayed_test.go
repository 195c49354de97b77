package rule

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/sdk/clock"
)

// heldBack is a receiver that holds back every attempt, as PagerDuty's
// pacing does, until released: nothing is sent, nothing fails.
type heldBack struct {
	f        *clock.Fake
	released atomic.Bool
}

func (h *heldBack) Notify(context.Context, *notify.Message) (bool, error) {
	if h.released.Load() {
		return false, nil
	}
	se := &notify.StatusError{StatusCode: 429, RetryAt: h.f.Now().Add(30 * time.Second)}
	return true, fmt.Errorf("held back ahead of the rate limit, no request sent: %w: %w", notify.ErrNotAttempted, se)
}

// scrape appends the gauges and counters of reg at t to the store, as a
// scrape of the engine's /metrics would.
func scrape(t *testing.T, reg *prometheus.Registry, db *embedded.DB, at time.Time) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	app := db.Appender(context.Background())
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			kv := []string{"__name__", mf.GetName()}
			for _, lp := range m.GetLabel() {
				kv = append(kv, lp.GetName(), lp.GetValue())
			}
			var v float64
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			default:
				continue
			}
			if _, err := app.Append(0, labels.FromStrings(kv...), at.UnixMilli(), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
}

// queryDB evaluates the rules' PromQL on the store's engine.
func queryDB(db *embedded.DB) QueryFunc {
	return func(ctx context.Context, q string, at time.Time) ([]Sample, error) {
		res, err := db.Query(ctx, q, at)
		if err != nil {
			return nil, err
		}
		if res.Type != signals.TypeVector {
			return nil, nil
		}
		out := make([]Sample, 0, len(res.Samples))
		for _, s := range res.Samples {
			out = append(out, Sample{Labels: s.Labels, Value: s.V})
		}
		return out, nil
	}
}

// A notification held back by the receiver's pacing fails nothing, so
// GovernorAlertReceiverFailing stays quiet; once it has waited more than
// ten minutes, governor_alerts_notification_oldest_seconds raises the
// built-in P1 for its receiver, which resolves once it is delivered.
func TestBuiltinRuleFiresOnANotificationHeldBackTooLong(t *testing.T) {
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	clk := clock.NewFake(t0)
	reg := prometheus.NewRegistry()
	metrics := notify.NewMetrics(reg)
	rx := &heldBack{f: clk}
	q := notify.NewQueue("pager", rx, notify.QueueOptions{Clock: clk, Metrics: metrics})
	t.Cleanup(q.Close)
	ev, err := NewEvaluator(Builtin())
	if err != nil {
		t.Fatal(err)
	}
	const name = ReceiverDelayedRule
	firing := func(at time.Time) (alerts.Alert, bool) {
		t.Helper()
		res := ev.Eval(context.Background(), at, queryDB(db))
		// Rules over series this test does not write find nothing; none
		// may fail.
		if len(res.Errors) > 0 {
			t.Fatalf("eval: %v", res.Errors)
		}
		for _, a := range res.Alerts {
			if a.Labels[AlertNameLabel] == name && a.EndsAt.IsZero() {
				return a, true
			}
		}
		return alerts.Alert{}, false
	}

	if !q.Enqueue(notify.NewMessage(notify.KindNotify, "pager", "g", nil, nil, clk.Now())) {
		t.Fatal("not queued")
	}
	const step = 15 * time.Second
	var firedAt time.Duration
	for at := time.Duration(0); at <= 12*time.Minute; at += step {
		if at > 0 {
			for clk.Pending() == 0 {
				runtime.Gosched()
			}
			clk.Advance(step)
		}
		scrape(t, reg, db, clk.Now())
		a, ok := firing(clk.Now())
		if ok && firedAt == 0 {
			firedAt = at
			if a.Labels["receiver"] != "pager" || a.Severity() != alerts.P1 {
				t.Fatalf("alert %v: want receiver pager, P1", a.Labels)
			}
		}
		if !ok && firedAt != 0 {
			t.Fatalf("resolved at %s while the notification still waits", at)
		}
	}
	if got := testutil.ToFloat64(metrics.Failed("pager")); got != 0 {
		t.Fatalf("failed_total %v, want 0: nothing was attempted", got)
	}
	if firedAt != 10*time.Minute+step {
		t.Fatalf("fired at %s, want at the first step past 10m (%s)", firedAt, 10*time.Minute+step)
	}

	// Delivered at the receiver's next try, 30s after the last: the alert
	// resolves. The receiver is released once the queue waits for that
	// try, not while the last one may still be under way.
	for clk.Pending() == 0 {
		runtime.Gosched()
	}
	rx.released.Store(true)
	clk.Advance(30 * time.Second)
	if err := q.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	scrape(t, reg, db, clk.Now())
	if _, ok := firing(clk.Now()); ok {
		t.Fatal("still firing once the notification was delivered")
	}
	if got := testutil.ToFloat64(metrics.Sent("pager")); got != 1 {
		t.Fatalf("sent_total %v, want 1", got)
	}
}
