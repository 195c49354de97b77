// Package alertsource adapts the alerting pipeline (alerts/manager) to what
// the web UI reads and does with alerts (model.Alerts): firing alerts by
// tier with their acknowledgement and silences, acknowledging one, and
// silencing a service (optionally one tier) for a while.
//
// An alert's ID in the UI is its label fingerprint; its service and summary
// come from the "service" label and the "summary" annotation.
//
// On a standby replica (one whose manager does not lead) a read first reads
// the alerts, silences and acknowledgements from the shared store
// (manager.Sync), so that its web UI shows what the leader evaluated, not
// what the replica held when it started. One store read serves every read
// for Options.SyncEvery (a second by default), and readers that ask while
// it runs wait for it rather than read the store again: page views, API
// calls and the live overview's ticks do not each cost a store read.
package alertsource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
)

// DefaultSyncEvery is how long a standby's read of the store serves its
// web UI's reads unless Options.SyncEvery says otherwise.
const DefaultSyncEvery = time.Second

// Options configure New.
type Options struct {
	// Manager is the running alert pipeline; required.
	Manager *manager.Manager
	Clock   clock.Clock
	// SyncEvery is how long a standby's read of the store serves later
	// reads (DefaultSyncEvery if zero; negative is refused).
	SyncEvery time.Duration
}

// Source is a model.Alerts backed by an alerts manager.
type Source struct {
	m   *manager.Manager
	clk clock.Clock

	leading   func() bool
	readStore func(context.Context) error
	every     time.Duration
	// syncing holds a token while a reader checks or reads the store; the
	// fields below are the holder's.
	syncing  chan struct{}
	synced   bool
	syncedAt int64 // clk.Nanotime() when the last good store read began
	// syncedEnd is when it ended: a reader that asked before then, while
	// it ran, is served by it.
	syncedEnd int64
}

var _ model.Alerts = (*Source)(nil)

// New returns a Source.
func New(o Options) (*Source, error) {
	if o.Manager == nil {
		return nil, fmt.Errorf("%w: alertsource: Options.Manager is required", alerts.ErrInvalid)
	}
	if o.SyncEvery < 0 {
		return nil, fmt.Errorf("%w: alertsource: Options.SyncEvery is %v, want zero (for %v) or more", alerts.ErrInvalid, o.SyncEvery, DefaultSyncEvery)
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &Source{m: o.Manager, clk: o.Clock, leading: o.Manager.Leading, readStore: o.Manager.Sync,
		every: o.SyncEvery, syncing: make(chan struct{}, 1)}, nil
}

func (s *Source) convert(st manager.Status, now time.Time) model.Alert {
	a := model.Alert{
		ID: st.Fingerprint, Tier: model.Tier(st.Severity()), Service: st.Labels["service"],
		Summary: st.Annotations["summary"], Since: st.StartsAt, Resolved: st.EndsAt,
	}
	if a.Summary == "" {
		a.Summary = st.Labels["alertname"]
	}
	if st.Acknowledged != nil {
		a.AckedBy, a.AckedAt = st.Acknowledged.By, st.Acknowledged.At
	}
	if len(st.SilencedBy) > 0 {
		for _, sil := range s.m.Silences() {
			if slices.Contains(st.SilencedBy, sil.ID) && sil.EndsAt.After(a.SilencedUntil) {
				a.SilencedUntil = sil.EndsAt
			}
		}
		if a.SilencedUntil.IsZero() {
			a.SilencedUntil = now // silenced, end unknown
		}
	}
	return a
}

// sync brings a standby's view up to date (the leader's is, by its steps),
// reading the store unless a read that began less than s.every ago did. A
// reader that comes while another reads the store waits for that read and
// is served by it. A failed read is not remembered: the next reader tries
// again.
func (s *Source) sync(ctx context.Context) error {
	if s.leading() {
		return nil
	}
	asked := s.clk.Nanotime()
	select {
	case s.syncing <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("alertsource: waiting for the read of the alerts the leader stored: %w", ctx.Err())
	}
	defer func() { <-s.syncing }()
	start := s.clk.Nanotime()
	// A read that ended after this reader asked (it ran while the reader
	// waited) serves it, however long it took: a slow store is read once,
	// not once more per reader queued behind it.
	if s.synced && (s.syncedEnd >= asked || start-s.syncedAt < int64(s.every)) {
		return nil
	}
	if err := s.readStore(ctx); err != nil {
		return fmt.Errorf("alertsource: reading the alerts the leader stored: %w", err)
	}
	s.synced, s.syncedAt, s.syncedEnd = true, start, s.clk.Nanotime()
	return nil
}

func (s *Source) all(now time.Time) []model.Alert {
	sts := s.m.Alerts(now)
	out := make([]model.Alert, 0, len(sts))
	for _, st := range sts {
		out = append(out, s.convert(st, now))
	}
	return out
}

// Firing returns the alerts firing now, most severe and newest first.
func (s *Source) Firing(ctx context.Context) ([]model.Alert, error) {
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	now := s.clk.Now()
	var out []model.Alert
	for _, a := range s.all(now) {
		if a.Resolved.IsZero() {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b model.Alert) int {
		if ra, rb := alerts.Severity(a.Tier).Rank(), alerts.Severity(b.Tier).Rank(); ra != rb {
			return ra - rb
		}
		return b.Since.Compare(a.Since)
	})
	return out, nil
}

// History returns the alerts the manager holds (firing and recently
// resolved), newest first.
func (s *Source) History(ctx context.Context, limit int) ([]model.Alert, error) {
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	out := s.all(s.clk.Now())
	slices.SortStableFunc(out, func(a, b model.Alert) int { return b.Since.Compare(a.Since) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Ack acknowledges the firing alert with fingerprint id.
func (s *Source) Ack(ctx context.Context, id, by string) (model.Alert, error) {
	fp, err := alerts.ParseFingerprint(id)
	if err != nil {
		return model.Alert{}, fmt.Errorf("%w: no alert %q", model.ErrNotFound, id)
	}
	now := s.clk.Now()
	if _, err := s.m.Acknowledge(ctx, fp, by, "acknowledged in the web UI", now); err != nil {
		if errors.Is(err, alerts.ErrNotFound) {
			return model.Alert{}, fmt.Errorf("%w: %w", model.ErrNotFound, err)
		}
		return model.Alert{}, err
	}
	for _, a := range s.all(now) {
		if a.ID == id {
			return a, nil
		}
	}
	return model.Alert{}, fmt.Errorf("%w: alert %q resolved meanwhile", model.ErrNotFound, id)
}

// Silence mutes the service's alerts (of one tier if set) until sl.Until.
func (s *Source) Silence(ctx context.Context, sl model.Silence) error {
	ms := alerts.Matchers{}
	m, err := alerts.NewMatcher(alerts.MatchEqual, "service", sl.Service)
	if err != nil {
		return fmt.Errorf("%w: service: %w", model.ErrInvalid, err)
	}
	ms = append(ms, m)
	if sl.Tier != "" {
		m, err := alerts.NewMatcher(alerts.MatchEqual, alerts.SeverityLabel, string(sl.Tier))
		if err != nil {
			return fmt.Errorf("%w: tier: %w", model.ErrInvalid, err)
		}
		ms = append(ms, m)
	}
	now := s.clk.Now()
	_, err = s.m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: now, EndsAt: sl.Until, CreatedBy: sl.By, Comment: sl.Comment, CreatedAt: now})
	if errors.Is(err, alerts.ErrInvalid) {
		return fmt.Errorf("%w: %w", model.ErrInvalid, err)
	}
	return err
}
