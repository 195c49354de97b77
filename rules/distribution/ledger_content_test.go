package distribution

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/watch"
)

// An instance that reports version N with a checksum other than the one
// the rules store has for N (it still runs the old content of a
// republished version: its applier refused the new one) is not SYNCED:
// it is NACKED with reason other_content and an error naming both
// checksums. A matching checksum is SYNCED, and a report without one (an
// older SDK) is recorded as before.
func TestLedgerComparesTheChecksumAnInstanceRunsWithTheStore(t *testing.T) {
	published := envelope(t, "checkout", 5)
	old := envelopeWithRate(t, "checkout", 5, 99).Checksum
	ack := func(sum string) *watch.Report {
		return &watch.Report{Service: "checkout", Instance: "pod-0", Version: 5, Status: watch.StatusACK,
			Checksum: sum, Running: 5, RunningChecksum: sum}
	}
	refused := &watch.Report{Service: "checkout", Instance: "pod-0", Version: 5, Status: watch.StatusNACK,
		Reason: watch.ReasonApply, Error: "route limits conflict", Checksum: published.Checksum, Running: 5, RunningChecksum: old}
	beat := func(sum string) *watch.Heartbeat {
		return &watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: 5, RunningChecksum: sum, IntervalMS: 1000}
	}
	repeating := beat(old)
	repeating.NackVersion, repeating.NackReason, repeating.NackError, repeating.NackChecksum = 5, watch.ReasonApply, "route limits conflict", published.Checksum
	otherContent := "runs other content of version 5: checksum " + old + ", published " + published.Checksum
	tests := []struct {
		name   string
		msgs   []any
		state  State
		reason string
		err    string // substring of the recorded error
	}{
		{"matching checksum", []any{ack(published.Checksum)}, StateSynced, "", ""},
		{"no checksum (older SDK)", []any{ack("")}, StateSynced, "", ""},
		{"no checksum in heartbeats (older SDK)", []any{beat("")}, StateSynced, "", ""},
		{"NACK of the published content while running the old", []any{refused}, StateNacked, NackOtherContent, otherContent},
		{"NACK repeated by heartbeats", []any{refused, repeating}, StateNacked, NackOtherContent, "route limits conflict"},
		{"heartbeat only, the report lost", []any{beat(old)}, StateNacked, NackOtherContent, otherContent},
		{"ACK of other content", []any{ack(old)}, StateNacked, NackOtherContent, otherContent},
		{"the published content applied later", []any{refused, ack(published.Checksum)}, StateSynced, "", ""},
		{"a heartbeat with the published content", []any{beat(old), beat(published.Checksum)}, StateSynced, "", ""},
	}
	for _, st := range ledgerStores {
		for _, tt := range tests {
			t.Run(st.name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				clk := clock.NewFake(time.Unix(1_700_000_000, 0))
				l, err := NewLedger(LedgerOptions{Store: st.open(t), Clock: clk, Registerer: prometheus.NewRegistry(),
					Checksum: func(_ context.Context, service string, v int64) (string, error) {
						if service == "checkout" && v == 5 {
							return published.Checksum, nil
						}
						return "", nil
					}})
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Published(ctx, published, nil); err != nil {
					t.Fatal(err)
				}
				for i, m := range tt.msgs {
					clk.Advance(time.Second)
					switch m := m.(type) {
					case *watch.Report:
						m.At = clk.Now()
						err = l.HandleReport(ctx, m)
					case *watch.Heartbeat:
						m.At = clk.Now()
						err = l.HandleHeartbeat(ctx, m)
					}
					if err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
				}
				in, _, _ := l.o.Store.Instance(ctx, "checkout", "pod-0")
				if in.State != tt.state || in.NackReason != tt.reason || !strings.Contains(in.NackError, tt.err) {
					t.Fatalf("instance %s reason %q error %q, want %s reason %q error with %q",
						in.State, in.NackReason, in.NackError, tt.state, tt.reason, tt.err)
				}
				if tt.state == StateNacked {
					hist, _ := l.History(ctx, "checkout", "pod-0", 1)
					if len(hist) != 1 || hist[0].To != StateNacked || !strings.Contains(hist[0].Detail, "runs other content of version 5") {
						t.Fatalf("history %+v, want the move to NACKED with the reason", hist)
					}
				}
			})
		}
	}
}

// Messages from NATS (one at a time, and in batches on a SQL store) are
// compared as well; the store is asked once per version between sweeps.
func TestLedgerComparesChecksumsOfMessagesFromNATS(t *testing.T) {
	published := envelope(t, "checkout", 5)
	old := envelopeWithRate(t, "checkout", 5, 99).Checksum
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			var lookups atomic.Int64
			l, err := NewLedger(LedgerOptions{Store: st.open(t), Clock: clock.NewFake(time.Unix(1_700_000_000, 0)),
				Registerer: prometheus.NewRegistry(),
				Checksum: func(context.Context, string, int64) (string, error) {
					lookups.Add(1)
					return published.Checksum, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Published(ctx, envelope(t, "checkout", 5), nil); err != nil {
				t.Fatal(err)
			}
			subject := l.o.Names.HeartbeatSubject("checkout")
			msg := func(instance, sum string) *nats.Msg {
				b, _ := json.Marshal(watch.Heartbeat{Service: "checkout", Instance: instance, Running: 5, RunningChecksum: sum})
				return &nats.Msg{Subject: subject, Data: b}
			}
			l.record(ctx, msg("pod-0", old))
			l.recordBatch(ctx, []*nats.Msg{msg("pod-1", old), msg("pod-2", published.Checksum)})
			want := map[string]State{"pod-0": StateNacked, "pod-1": StateNacked, "pod-2": StateSynced}
			for id, state := range want {
				if in, _, _ := l.o.Store.Instance(ctx, "checkout", id); in.State != state {
					t.Errorf("%s: %s (%s), want %s", id, in.State, in.NackError, state)
				}
			}
			if n := lookups.Load(); n != 0 {
				t.Fatalf("%d lookups, want none: the publication told the checksum", n)
			}
			if err := l.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			l.record(ctx, msg("pod-0", old))
			l.record(ctx, msg("pod-1", old))
			if n := lookups.Load(); n != 1 {
				t.Fatalf("%d lookups after a sweep, want 1", n)
			}
		})
	}
}

// storeOutbox is a MemoryOutbox that reads versions as a rules store does.
type storeOutbox struct {
	*MemoryOutbox
	versions map[int64]string
}

func (o storeOutbox) Get(_ context.Context, service string, number int64) (versioning.Version, error) {
	sum, ok := o.versions[number]
	if !ok || service != "checkout" {
		return versioning.Version{}, versioning.ErrNotFound
	}
	return versioning.Version{Service: service, Number: number, Checksum: sum}, nil
}

// A Plane whose Outbox is a rules store gives its ledger the store's
// checksums; a version the store does not have has none.
func TestPlaneGivesTheLedgerTheChecksumsOfTheRulesStore(t *testing.T) {
	ctx := context.Background()
	outbox := storeOutbox{NewMemoryOutbox(nil), map[int64]string{5: "sha256:05"}}
	plane, err := NewPlane(ctx, PlaneOptions{Conn: connect(t, embedded(t).URL()), Names: uniqueNames(t), Outbox: outbox,
		Store: NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	sum := plane.Ledger().o.Checksum
	if sum == nil {
		t.Fatal("the ledger has no Checksum lookup")
	}
	for v, want := range map[int64]string{5: "sha256:05", 6: ""} {
		if got, err := sum(ctx, "checkout", v); err != nil || got != want {
			t.Errorf("v%d: %q, %v; want %q", v, got, err, want)
		}
	}
}
