// Package watch keeps an SDK instance on the rule version the control plane
// published for its service, and tells the control plane what it runs.
//
// At start a Watcher applies the last-known-good version from a local cache
// file, so a service starts protected even when NATS is down; if the Applier
// refuses it, or the file does not decode (written by a newer SDK before a
// rollback of the binary, or damaged), the last stable version the instance
// ran (kept beside the cache file), and the cached version is NACKed. It
// then watches its service's keys in the JetStream KV bucket (Names): each
// new value is checked (size, JSON, checksum, service, validation), applied
// atomically through the Applier, written to the cache (temporary file,
// fsync, rename) and answered with an ACK, or refused with a NACK that
// carries the reason and the validation error; a refused value never
// replaces the rules in force.
// Versions older than the running one are ignored, with one exception: an
// instance running a version above the stable one that no canary selecting
// it holds (its canary was aborted, or replaced by one for other instances
// or by a refused record, also while it was down and restarted on that
// canary from the cache) returns to the stable version. An instance knows
// what it runs by version and checksum: the same version with other content
// (a rules store restored from a backup, or recreated with its numbering
// started again, published into a recreated bucket) is applied, cached and
// ACKed like a newer one, so the version an instance reports runs with the
// content published under it, also after a restart; the same version with
// the same checksum delivered again (a new revision, a re-watch, a resync)
// is neither applied nor reported again.
//
// A version the Applier refuses is NACKed and not tried again by this
// process, even when republished identically (a restarted process tries it
// once more: its configuration may accept it). The instance then runs the
// next version it can: the stable version when a canary was refused, and
// when the stable version itself was refused, the last stable version it
// ran (kept beside the cache file, so a restart returns to it too), so no instance stays on a canary that is gone.
// Heartbeats then repeat the NACK of the version the instance is meant to
// run, so the control plane shows why it runs another. After a reconnect the watch is
// re-established and delivers the latest value of each key, so no version is
// lost (a canary key without any entry then, as in a bucket recreated while
// NATS was down, ends the canary); a periodic resync reads the keys as a
// safety net. Heartbeats carry the instance id, labels, running version and
// the last NACK until a version as new is applied; none is sent while NATS
// is down, and one is sent as soon as it is back. Reports and heartbeats are
// stamped (At) on the instance's clock, never earlier than the previous
// one, so a wall clock stepped back does not make the control plane set
// them aside as out of order.
//
// Reports and heartbeats name content by checksum as well as by version:
// the checksum of the content running (running_checksum), of the content
// an ACK applied or a NACK refused (checksum), and of the refused content
// a heartbeat repeats (nack_checksum). A control plane compares them with
// the rules store's, so an instance still on the old content of a
// republished version (its Applier refused the new one) does not show as
// running the version. The fields are optional: a control plane accepts
// messages without them (older SDKs).
//
// # Upgrade order
//
// SDKs and control planes upgrade in either order. Fields of reports and
// heartbeats are only ever added, with the meaning of their absence kept,
// and DecodeReport and DecodeHeartbeat, which the control plane uses,
// ignore fields they do not know: a control plane older than an SDK
// records its messages without the newer fields (the checksums above are
// then not compared), and a newer control plane reads an older SDK's
// messages as before. Canary records go the other way and stay strict
// (DecodeCanary refuses unknown fields): an SDK that does not understand
// how a canary selects instances stays on the stable version rather than
// guess.
//
// The package never logs: failures that are not answered with a NACK (cache
// errors, watch errors) go to Options.OnError, and everything is counted in
// Prometheus metrics (governor_sdk_watch_*). Failures to establish the
// watch, failed resyncs and failed publications of reports and heartbeats
// count in governor_sdk_watch_errors_total{op="watch|resync|publish"};
// governor_sdk_watch_established is 1 while the watch is established, 0
// otherwise. A watch established when NATS goes down shows as such until
// the next resync fails (Options.Resync, then Options.RequestTimeout); from
// then on each attempt to establish it again counts as an error of op watch.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Applier applies a validated ruleset atomically; the SDK's *governor.Governor
// implements it. An error means the ruleset was refused and the previous one
// stays in force. Apply must accept a version below the one in force: the
// watcher applies one when the instance leaves a canary for the stable
// version.
type Applier interface {
	Apply(rs *rules.Ruleset, version int64) error
}

// Options configure a Watcher. Service, Conn and Applier are required.
type Options struct {
	// Service whose rules to follow.
	Service string
	// Instance identifies this instance in the ledger, in at most 256
	// bytes (as Service); default "<hostname>-<pid>".
	Instance string
	// Labels describe the instance (zone, pod, version of the service); a
	// canary may select by them. Encoded as JSON they take at most 16 KiB.
	Labels map[string]string
	// Conn is the NATS connection. Use Connect, or nats.Connect with
	// nats.RetryOnFailedConnect(true) so the watcher can start while NATS is
	// down.
	Conn *nats.Conn
	// Names gives the bucket, keys and subjects; the zero value uses
	// DefaultPrefix.
	Names Names
	// Applier applies a version.
	Applier Applier
	// CacheFile keeps the last-known-good version; empty disables the cache.
	// CacheFile+".stable" keeps the last stable version the instance ran,
	// to return to if a canary it runs is gone and the stable target is
	// refused, also after a restart, and to start on when CacheFile is
	// refused or does not decode.
	CacheFile string
	// MaxBytes refuses larger values; default MaxCanaryBytes, the largest
	// value a control plane publishes (a stable envelope is at most
	// rules.MaxEnvelopeBytes).
	MaxBytes int
	// Heartbeat is the heartbeat period; default 10s.
	Heartbeat time.Duration
	// Resync is the period of the safety-net read of the keys; default 30s.
	Resync time.Duration
	// RetryMin and RetryMax bound the back-off between attempts to establish
	// the watch; defaults 100ms and 2s. A reconnect retries at once.
	RetryMin, RetryMax time.Duration
	// RequestTimeout bounds one JetStream request; default 5s.
	RequestTimeout time.Duration
	// Clock drives the timers; default clock.Real.
	Clock clock.Clock
	// Registerer receives the metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// OnError receives failures that are not NACKs (cache, watch, publish),
	// and the refusal of a cached version at start, which is NACKed too:
	// NATS may not be there to carry the NACK. It must not block.
	OnError func(error)
}

// DefaultOptions returns the defaults of the optional fields.
func DefaultOptions() Options {
	return Options{
		MaxBytes:       MaxCanaryBytes,
		Heartbeat:      10 * time.Second,
		Resync:         30 * time.Second,
		RetryMin:       100 * time.Millisecond,
		RetryMax:       2 * time.Second,
		RequestTimeout: 5 * time.Second,
		Clock:          clock.Real{},
	}
}

// Watcher follows the published versions of one service.
type Watcher struct {
	opts  Options
	nc    *nats.Conn
	names Names
	st    *state
	// seen is the last entry handled per key (stable, canary), so a re-watch
	// or a resync that delivers it again costs no decoding. Only the Run
	// goroutine uses it.
	seen [2]entryID
	// canaryKnown is set once the current watch (or a resync during it)
	// has delivered an entry of the canary key. Only the Run goroutine
	// uses it.
	canaryKnown bool
	// stop stops a watch: jetstream.KeyWatcher.Stop, which tests wrap to
	// see when it runs.
	stop func(jetstream.KeyWatcher) error
}

// entryID identifies a KV entry: its revision and when it was stored (a
// recreated bucket restarts revisions, never timestamps).
type entryID struct {
	rev uint64
	at  time.Time
}

// Connect dials NATS for a watcher: it keeps retrying the first connection in
// the background (so the service starts while NATS is down) and reconnects
// forever. Production options (credentials, TLS, cluster URLs as a
// comma-separated list) are passed through.
func Connect(url string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Name("governor-sdk"),
	}, opts...)
	return nats.Connect(url, all...)
}

// New checks the options, applies the cached last-known-good version (if
// any) and returns a watcher; Run starts following the control plane.
func New(opts Options) (*Watcher, error) {
	d := DefaultOptions()
	switch {
	case opts.Service == "":
		return nil, fmt.Errorf("%w: Service is required", ErrInvalidOption)
	case opts.Conn == nil:
		return nil, fmt.Errorf("%w: Conn is required", ErrInvalidOption)
	case opts.Applier == nil:
		return nil, fmt.Errorf("%w: Applier is required", ErrInvalidOption)
	case opts.MaxBytes < 0 || opts.Heartbeat < 0 || opts.Resync < 0 || opts.RetryMin < 0 || opts.RetryMax < 0 || opts.RequestTimeout < 0:
		return nil, fmt.Errorf("%w: sizes and durations must not be negative", ErrInvalidOption)
	}
	if opts.Instance == "" {
		host, _ := os.Hostname()
		opts.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	// Reports and heartbeats carry these: the control plane refuses them
	// beyond these sizes.
	if len(opts.Service) > maxNameBytes || len(opts.Instance) > maxNameBytes {
		return nil, fmt.Errorf("%w: Service and Instance must be at most %d bytes, got %d and %d",
			ErrInvalidOption, maxNameBytes, len(opts.Service), len(opts.Instance))
	}
	if b, _ := json.Marshal(opts.Labels); len(b) > maxLabelBytes {
		return nil, fmt.Errorf("%w: Labels encode to %d bytes, at most %d allowed", ErrInvalidOption, len(b), maxLabelBytes)
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = d.MaxBytes
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = d.Heartbeat
	}
	if opts.Resync == 0 {
		opts.Resync = d.Resync
	}
	if opts.RetryMin == 0 {
		opts.RetryMin = d.RetryMin
	}
	if opts.RetryMax == 0 {
		opts.RetryMax = d.RetryMax
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = opts.RetryMin
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = d.RequestTimeout
	}
	if opts.Clock == nil {
		opts.Clock = d.Clock
	}
	if opts.OnError == nil {
		opts.OnError = func(error) {}
	}
	opts.Labels = maps.Clone(opts.Labels)
	m, err := newMetrics(opts.Registerer, opts.Service)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrInvalidOption, err)
	}
	w := &Watcher{opts: opts, nc: opts.Conn, names: opts.Names, stop: jetstream.KeyWatcher.Stop}
	stamps := &stamper{now: opts.Clock.Now}
	w.st = &state{
		service: opts.Service, instance: opts.Instance, labels: opts.Labels,
		maxBytes: opts.MaxBytes, applier: opts.Applier, cachePath: opts.CacheFile,
		now: stamps.stamp, send: w.sendReport, onError: opts.OnError, m: m,
	}
	w.st.loadCache()
	return w, nil
}

// Instance returns the instance id.
func (w *Watcher) Instance() string { return w.opts.Instance }

// Running returns the version applied last (0 for none).
func (w *Watcher) Running() int64 { return w.st.running.Load() }

// Run follows the control plane until ctx ends (it returns nil then) or
// the connection is closed for good (nats.ErrConnectionClosed). With NATS
// down it ends at once: it does not wait for the server to delete the
// watch's consumer, which the server deletes by itself.
func (w *Watcher) Run(ctx context.Context) error {
	reconnected := w.nc.StatusChanged(nats.CONNECTED)
	defer w.nc.RemoveStatusListener(reconnected)
	js, err := jetstream.New(w.nc)
	if err != nil {
		return fmt.Errorf("watch: jetstream: %w", err)
	}
	hb := w.opts.Clock.NewTimer(0)
	defer func() { hb.Stop() }()
	backoff := w.opts.RetryMin
	for ctx.Err() == nil {
		kv, kw, err := w.watch(ctx, js)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if w.nc.IsClosed() {
				return fmt.Errorf("watch: %w", nats.ErrConnectionClosed)
			}
			w.st.m.errors.WithLabelValues("watch").Inc()
			w.opts.OnError(err)
			if !w.wait(ctx, backoff, reconnected, &hb) {
				break
			}
			backoff = min(2*backoff, w.opts.RetryMax)
			continue
		}
		backoff = w.opts.RetryMin
		w.st.m.established.Set(1)
		w.follow(ctx, kv, kw, reconnected, &hb)
		w.st.m.established.Set(0)
		w.stopWatch(ctx, kw)
		if ctx.Err() == nil {
			w.st.m.rewatch.Inc()
		}
	}
	return nil
}

// watch binds the bucket and starts watching the service's two keys.
func (w *Watcher) watch(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, jetstream.KeyWatcher, error) {
	rctx, cancel := context.WithTimeout(ctx, w.opts.RequestTimeout)
	defer cancel()
	kv, err := js.KeyValue(rctx, w.names.Bucket())
	if err != nil {
		return nil, nil, fmt.Errorf("watch: bucket %s: %w", w.names.Bucket(), err)
	}
	// ctx, not rctx: nats.go stops the watch when this context ends (in a
	// goroutine of its own, which waits for the server as Stop does).
	kw, err := kv.Watch(ctx, w.names.ServiceKeys(w.opts.Service))
	if err != nil {
		return nil, nil, fmt.Errorf("watch: keys of %s: %w", w.opts.Service, err)
	}
	return kv, kw, nil
}

// stopWatch stops kw. A KeyWatcher's Stop unsubscribes, then asks the
// server to delete the watch's consumer and waits for the answer, up to
// nats.go's JetStream request timeout (5s, which the watcher cannot set).
// stopWatch waits for it only while the connection is up and ctx is not
// done: with NATS down the answer cannot come, and Run would end, or
// establish the watch again, 5s late. The stop left running ends when the
// request does: at the answer after a reconnect, at the timeout, or at once
// when the connection is closed. The consumer goes anyway: it is ephemeral,
// so the server deletes it a few seconds after its subscription is gone
// (its inactive threshold), and a restarted server has lost it (it is kept
// in memory).
func (w *Watcher) stopWatch(ctx context.Context, kw jetstream.KeyWatcher) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = w.stop(kw)
	}()
	if !w.nc.IsConnected() {
		return
	}
	select {
	case <-stopped:
	case <-ctx.Done():
	}
}

// wait sleeps for d, returning early on a reconnect (with a heartbeat); it
// keeps heartbeats going and reports false when ctx ends.
func (w *Watcher) wait(ctx context.Context, d time.Duration, reconnected <-chan nats.Status, hb *clock.Timer) bool {
	t := w.opts.Clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case <-reconnected:
			drain(reconnected)
			w.heartbeat(hb)
			return true
		case <-(*hb).C():
			w.heartbeat(hb)
		}
	}
}

// drain empties ch: reconnects that queued up while one was handled (a
// flapping network) are answered by the one watch and heartbeat that
// follow, not by one each, from every instance at once.
func drain(ch <-chan nats.Status) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// follow handles the watch's updates until ctx ends, the watch closes, a
// reconnect happens or a resync fails.
func (w *Watcher) follow(ctx context.Context, kv jetstream.KeyValue, kw jetstream.KeyWatcher, reconnected <-chan nats.Status, hb *clock.Timer) {
	resync := w.opts.Clock.NewTimer(w.opts.Resync)
	defer func() { resync.Stop() }()
	stableKey, canaryKey := w.names.StableKey(w.opts.Service), w.names.CanaryKey(w.opts.Service)
	w.canaryKnown = false
	for {
		select {
		case <-ctx.Done():
			return
		case <-reconnected:
			// The ordered consumer may have lost its place: watch again, which
			// delivers the latest value of each key.
			drain(reconnected)
			w.heartbeat(hb)
			return
		case <-(*hb).C():
			w.heartbeat(hb)
		case <-resync.C():
			if err := w.resync(ctx, kv); err != nil {
				w.st.m.errors.WithLabelValues("resync").Inc()
				w.opts.OnError(err)
				return
			}
			resync = w.opts.Clock.NewTimer(w.opts.Resync)
		case e, ok := <-kw.Updates():
			if !ok {
				return
			}
			if e == nil {
				// All initial values delivered, so the canary key is known.
				// Without any entry (never written, or a bucket recreated
				// while NATS was down) there is no canary: a canary record
				// from before the re-watch is forgotten, and a canary
				// version restored from the cache or run under that record
				// is left.
				if w.canaryKnown {
					w.st.settle()
				} else {
					// Values delivered from now on are newer: none of them
					// is one handled before.
					w.seen[1] = entryID{}
					w.st.onCanaryGone()
				}
				continue
			}
			switch e.Key() {
			case stableKey:
				w.handleEntry(true, e)
			case canaryKey:
				w.handleEntry(false, e)
			}
		}
	}
}

// handleEntry handles an entry unless it is the one last handled for its
// key, or one written before it: a resync may read a key ahead of the watch,
// which then still delivers the values the resync skipped.
func (w *Watcher) handleEntry(stable bool, e jetstream.KeyValueEntry) {
	i := 0
	if !stable {
		i = 1
		w.canaryKnown = true
	}
	id := entryID{rev: e.Revision(), at: e.Created()}
	if last := w.seen[i]; id.rev <= last.rev && !id.at.After(last.at) {
		// The same entry, or an older one of the same bucket (a recreated
		// bucket restarts revisions at a later time).
		return
	}
	w.seen[i] = id
	w.handle(stable, e.Operation(), e.Value())
}

func (w *Watcher) handle(stable bool, op jetstream.KeyValueOp, value []byte) {
	switch {
	case op != jetstream.KeyValuePut:
		if !stable {
			w.st.onCanaryGone()
		}
		// A deleted stable key changes nothing: the rules in force stay.
	case stable:
		w.st.onStable(value)
	default:
		w.st.onCanary(value)
	}
}

// resync reads both keys directly, in case the watch missed an update.
//
// It reads the canary key first and the stable key second, then acts on
// the stable read before the canary read. A promotion writes the stable
// key, then deletes the canary key: a canary read as gone therefore
// implies that the stable read, made after it, holds the promoted version,
// and the instance never returns from the promoted canary to the stable
// version it replaced. An abort deletes only the canary key: the stable
// read then holds the version to return to.
func (w *Watcher) resync(ctx context.Context, kv jetstream.KeyValue) error {
	rctx, cancel := context.WithTimeout(ctx, w.opts.RequestTimeout)
	defer cancel()
	get := func(key string) (jetstream.KeyValueEntry, error) {
		e, err := kv.Get(rctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("watch: resync %s: %w", key, err)
		}
		return e, nil
	}
	canary, err := get(w.names.CanaryKey(w.opts.Service))
	if err != nil {
		return err
	}
	stable, err := get(w.names.StableKey(w.opts.Service))
	if err != nil {
		return err
	}
	act := func(isStable bool, e jetstream.KeyValueEntry) {
		if e == nil {
			w.handle(isStable, jetstream.KeyValueDelete, nil)
			return
		}
		w.handleEntry(isStable, e)
	}
	act(true, stable)
	act(false, canary)
	return nil
}

// heartbeat publishes a heartbeat, if the connection is up, and schedules
// the next. While NATS is down a heartbeat would wait in the connection's
// reconnect buffer with every other one of the outage, all reaching the
// control plane together after the reconnect: a burst of stale heartbeats
// from every instance just as it recovers (and, once the buffer is full,
// an error every period). The reconnect sends a fresh one instead.
func (w *Watcher) heartbeat(hb *clock.Timer) {
	if w.nc.IsConnected() {
		h := Heartbeat{Service: w.opts.Service, Instance: w.opts.Instance,
			Labels: w.opts.Labels, IntervalMS: w.opts.Heartbeat.Milliseconds(), At: w.st.now()}
		h.Running, h.RunningChecksum = w.st.runningContent()
		h.NackVersion, h.NackReason, h.NackError, h.NackChecksum = w.st.nackContent()
		w.publish(w.names.HeartbeatSubject(w.opts.Service), &h)
	}
	(*hb).Stop()
	*hb = w.opts.Clock.NewTimer(w.opts.Heartbeat)
}

// stamper gives reports and heartbeats their At: the clock's time, but never
// earlier than an At it gave before. The control plane orders an instance's
// messages by At and records the Running, Labels and NACK of none older
// than the newest it has; a wall clock stepped back (an NTP correction, a
// resumed VM) would otherwise have it set aside every report and heartbeat
// of the instance until the clock caught up again.
type stamper struct {
	now  func() time.Time
	mu   sync.Mutex
	last time.Time
}

func (s *stamper) stamp() time.Time {
	// Round(0) drops the monotonic reading: with it, Before would compare
	// monotonic times, which never step back, while At goes on the wire as
	// the wall clock, which does.
	t := s.now().Round(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.Before(s.last) {
		return s.last
	}
	s.last = t
	return t
}

func (w *Watcher) sendReport(r *Report) {
	w.publish(w.names.ReportSubject(w.opts.Service), r)
}

func (w *Watcher) publish(subject string, v any) {
	data, err := json.Marshal(v)
	if err == nil {
		err = w.nc.Publish(subject, data)
	}
	if err != nil {
		w.st.m.errors.WithLabelValues("publish").Inc()
		w.opts.OnError(fmt.Errorf("watch: publish %s: %w", subject, err))
	}
}
