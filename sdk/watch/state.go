package watch

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/rules"
)

// state is the watcher's decision logic, free of transport: it takes the raw
// values of the stable and canary keys, decides what to apply, applies,
// persists and reports. It runs on one goroutine; only running is read from
// others.
type state struct {
	service   string
	instance  string
	labels    map[string]string
	maxBytes  int
	applier   Applier
	cachePath string
	now       func() time.Time
	send      func(*Report)
	onError   func(error)
	m         *metrics

	running atomic.Int64
	current *rules.Envelope // the envelope in force (applied or restored from the cache)
	stable  *rules.Envelope // latest valid stable version seen
	good    *rules.Envelope // latest stable version this process ran: the fallback
	canary  *Canary         // current valid canary record, if any
	// canaryKnown is set once the canary key is known (a value, its
	// deletion, the end of the watch's initial values): from then on a
	// running version above the stable one is left when nothing stages it.
	canaryKnown bool
	// refused holds the envelopes the applier refused, by version and
	// checksum, with their NACK: none is tried again in this process.
	// Versions below the stable one are dropped (no target is below it),
	// but for the last good stable version, a fallback.
	refused map[envelopeID]*Report

	mu       sync.Mutex // guards lastNack and runningSum, read by heartbeats
	lastNack *Report    // nil once a version at least as new is applied
	// runningSum is the checksum of the content running, set with running
	// (runningContent reads both under mu).
	runningSum string
}

// envelopeID names an envelope: the same version with other content is
// another envelope.
type envelopeID struct {
	version  int64
	checksum string
}

func idOf(env *rules.Envelope) envelopeID { return envelopeID{env.Version, env.Checksum} }

// maxRefused bounds the refused envelopes kept above the stable version (a
// run of refused canaries between two stable versions).
const maxRefused = 64

// loadCache applies the cached last-known-good version, if any. It may be a
// canary version: settle leaves it once the watch shows that no canary
// selecting this instance holds it any more.
//
// When the applier refuses it (a new binary whose configuration refuses
// the cached canary), or the cache file cannot be read or decoded (a
// version written by a newer SDK, with a field this one does not know,
// before a rollback of the binary; a damaged file), the instance starts on
// the last stable version it ran, kept beside the cache, rather than on no
// rules at all until the watch delivers a version it accepts, which NATS
// being down may delay for good. A refused cached version is NACKed and not
// offered again by this process, like any refusal; a cached version that
// does not decode is NACKed as the watch would NACK that value. Heartbeats
// repeat the NACK, the report says which version runs instead. The cache
// files are left as they are: the next process, whose configuration may
// accept the cached version, tries it once more.
func (s *state) loadCache() {
	if s.cachePath == "" {
		return
	}
	env, unreadable, err := readCache(s.cachePath, s.service)
	if err != nil {
		s.m.cacheErr.WithLabelValues("load").Inc()
		s.onError(err)
	} else if env == nil {
		return
	}
	// The last stable version the instance ran, kept beside the cache: the
	// fallback if a canary is gone and the stable target is refused.
	// Missing when no process ran a stable version since the file was
	// introduced; the watch confirms the cached one then (onStable).
	if g, err := LoadCache(stableCachePath(s.cachePath), s.service); err != nil {
		s.m.cacheErr.WithLabelValues("load").Inc()
		s.onError(err)
	} else {
		s.good = g
	}
	if env != nil {
		err = s.applier.Apply(env.Ruleset, env.Version)
		if err == nil {
			s.current = env
			s.setRunning(env)
			return
		}
		s.m.cacheErr.WithLabelValues("load").Inc()
		s.onError(fmt.Errorf("%w: apply cached version %d: %w", ErrCache, env.Version, err))
	}
	g := s.good
	if g != nil && !same(g, env) {
		if gerr := s.applier.Apply(g.Ruleset, g.Version); gerr == nil {
			s.current = g
			s.setRunning(g)
		} else {
			s.m.cacheErr.WithLabelValues("load").Inc()
			s.onError(fmt.Errorf("%w: apply cached stable version %d: %w", ErrCache, g.Version, gerr))
			s.reject(g.Version, g.Checksum, ReasonApply, gerr)
			s.refuse(g)
		}
	}
	// Last, so that heartbeats repeat the NACK of the version the instance
	// was meant to run, and the report carries the version running instead.
	switch {
	case env != nil:
		s.reject(env.Version, env.Checksum, ReasonApply, err)
		s.refuse(env)
	case unreadable != nil:
		// The reason and error the watch gives the same value; it does
		// not decode there either, so decodeEnvelope refuses it.
		if _, reason, derr := s.decodeEnvelope(unreadable); derr != nil {
			s.reject(versionOf(unreadable), "", reason, derr)
		}
	}
}

// setRunning makes env the content running, as reports and heartbeats say.
func (s *state) setRunning(env *rules.Envelope) {
	s.mu.Lock()
	s.runningSum = env.Checksum
	s.running.Store(env.Version)
	s.mu.Unlock()
	s.m.running.Set(float64(env.Version))
}

// runningContent returns the version running and the checksum of its
// content ("" when none runs), as one.
func (s *state) runningContent() (int64, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running.Load(), s.runningSum
}

// onStable handles a value of the stable key.
func (s *state) onStable(data []byte) {
	env, reason, err := s.decodeEnvelope(data)
	if err != nil {
		s.reject(versionOf(data), "", reason, err)
		return
	}
	// A newer version replaces the stable one; so does the same version
	// with other content (a store rebuilt under the same numbers), which
	// the refusal of the first one does not cover.
	if s.stable == nil || env.Version > s.stable.Version ||
		(env.Version == s.stable.Version && env.Checksum != s.stable.Checksum) {
		s.stable = env
		for id := range s.refused {
			// The last good stable version stays: it is a fallback.
			if id.version < env.Version && (s.good == nil || id != idOf(s.good)) {
				delete(s.refused, id)
			}
		}
	}
	if same(s.current, s.stable) {
		// What runs is the stable version (a cached one, a promoted canary).
		s.setGood(s.stable)
	}
	// A running version above this stable one that nothing stages is left
	// (a canary aborted while no valid stable version was known: a bucket
	// recreated while NATS was down, a stable value this SDK refused).
	if s.canaryKnown {
		s.settle()
	}
	s.reconcile(env.Version)
}

// onCanary handles a value of the canary key.
//
// A refused record (oversized, not JSON, invalid, for another service) is
// NACKed and ends the canary it replaces: the key no longer stages that
// version, so an instance running it returns to the stable one.
func (s *state) onCanary(data []byte) {
	c, version, reason, err := s.decodeCanary(data)
	if err != nil {
		s.reject(version, "", reason, err)
		s.onCanaryGone()
		return
	}
	// The record replaces any previous canary, which this instance may be
	// running: settle first, then move forward to this canary if it selects
	// the instance (reconcile also counts it as ignored if it is older).
	s.canary = c
	s.canaryKnown = true
	s.settle()
	if c.Selector.Selects(s.service, s.instance, s.labels) {
		s.reconcile(c.Envelope.Version)
	} else {
		// The NACK of a replaced canary no longer explains anything.
		s.nackTarget()
	}
}

// decodeCanary checks a canary value: size, JSON, record, service. On a
// refusal it returns the version the value names (0 if none), the reason
// and the error.
func (s *state) decodeCanary(data []byte) (*Canary, int64, Reason, error) {
	if len(data) > s.maxBytes {
		return nil, 0, ReasonOversized, fmt.Errorf("%w: canary is %d bytes, at most %d allowed", rules.ErrInvalid, len(data), s.maxBytes)
	}
	if !json.Valid(data) {
		return nil, 0, ReasonNotJSON, fmt.Errorf("%w: canary payload is not JSON", rules.ErrInvalid)
	}
	c, err := DecodeCanary(data)
	if err != nil {
		var probe struct {
			Envelope json.RawMessage `json:"envelope"`
		}
		_ = json.Unmarshal(data, &probe)
		return nil, versionOf(probe.Envelope), classify(err), err
	}
	if c.Envelope.Service != s.service {
		return nil, c.Envelope.Version, ReasonWrongService, wrongService(c.Envelope.Service, s.service)
	}
	return c, 0, "", nil
}

// onCanaryGone handles the deletion of the canary key (promotion or abort),
// also when the state never saw the record: an instance restarted while the
// canary it ran was aborted finds only the deletion.
func (s *state) onCanaryGone() {
	s.canary = nil
	s.canaryKnown = true
	s.settle()
	s.reconcile(0)
}

// settle leaves a running version that nothing stages for this instance any
// more: one above the stable version that no canary selecting this instance
// holds, content included (an aborted canary, a canary replaced by one that
// does not select this instance, by a refused record or by the same number
// with other content, or a canary restored from the cache at start that is
// gone since). The instance moves to the version it should run (see
// desired): usually the stable one, the last good stable one when the
// applier refused that. These are the cases where it applies a lower
// version. Without a stable version it keeps what it runs, having nothing
// to return to.
//
// It runs only once the canary key is known (a canary value, its deletion,
// or the end of the watch's initial values): a canary restored from the
// cache would otherwise be left before its record arrives.
func (s *state) settle() {
	s.canaryKnown = true
	cur := s.running.Load()
	if s.stable == nil || s.stable.Version >= cur {
		return
	}
	if c := s.canary; c != nil && s.runs(c.Envelope) && c.Selector.Selects(s.service, s.instance, s.labels) {
		return
	}
	s.move(func(d *rules.Envelope) bool { return !s.runs(d) })
	s.nackTarget()
}

// target is the version this instance is meant to run: the stable version,
// or a newer one of a canary that selects it.
func (s *state) target() *rules.Envelope {
	t := s.stable
	if c := s.canary; c != nil && c.Selector.Selects(s.service, s.instance, s.labels) {
		if t == nil || c.Envelope.Version > t.Version {
			t = c.Envelope
		}
	}
	return t
}

// desired is the version this instance should run: the target unless the
// applier refused it; then the stable version (for a refused canary)
// unless refused too; then the last stable version this process ran, so an
// instance whose stable target was refused does not stay on a canary that
// is gone. Nil when there is none of these.
func (s *state) desired() *rules.Envelope {
	if t := s.target(); t != nil && !s.isRefused(t) {
		return t
	}
	if t := s.stable; t != nil && !s.isRefused(t) {
		return t
	}
	if g := s.good; g != nil && !s.isRefused(g) {
		return g
	}
	return nil
}

func (s *state) isRefused(env *rules.Envelope) bool {
	_, ok := s.refused[idOf(env)]
	return ok
}

// move applies the desired version while want accepts it, falling back to
// the next one each time the applier refuses (at most target, stable, last
// good stable: each refusal removes one).
func (s *state) move(want func(*rules.Envelope) bool) {
	for {
		d := s.desired()
		if d == nil || !want(d) || s.apply(d) {
			return
		}
	}
}

// reconcile applies the desired version if it is newer than the running
// one, or the same version with other content (a store restored or
// recreated, numbering again from the start: what the control plane now
// calls this version is not what runs). The same envelope delivered again
// changes nothing. received is the version that triggered it (0 for none):
// when it is older than the running version it is counted as ignored.
func (s *state) reconcile(received int64) {
	cur := s.running.Load()
	if received > 0 && received < cur {
		s.m.messages.WithLabelValues("ignored").Inc()
	}
	s.move(func(d *rules.Envelope) bool { return d.Version > cur || d.Version == cur && !s.runs(d) })
	s.nackTarget()
}

// runs reports whether env is the envelope in force: its version and its
// content. The instance reports only the version, so it must run the
// content the control plane publishes under that number.
func (s *state) runs(env *rules.Envelope) bool { return same(s.current, env) }

// nackTarget makes the last NACK, repeated by heartbeats, that of the
// target when the instance runs another version, or other content of its
// version, because the applier refused it, and reports it again if it was
// not the last NACK: the control plane then sees why the instance is not on
// its target (a NACK of a later canary since gone, or an applied canary,
// had replaced it).
func (s *state) nackTarget() {
	t := s.target()
	if t == nil || s.runs(t) || !s.isRefused(t) {
		return
	}
	s.mu.Lock()
	last := s.lastNack
	s.mu.Unlock()
	prev := s.refused[idOf(t)]
	if last != nil && last.Version == t.Version && last.Reason == prev.Reason {
		return
	}
	r := s.report(t.Version, StatusNACK, prev.Reason, nil)
	r.Error, r.Checksum = prev.Error, t.Checksum
	s.mu.Lock()
	s.lastNack = r
	s.mu.Unlock()
	s.send(r)
}

// apply applies env and reports whether the applier took it. A refused
// envelope is NACKed and remembered: it is not tried again in this process
// (a republished identical envelope included), only after a restart, which
// may bring a configuration that accepts it.
func (s *state) apply(env *rules.Envelope) bool {
	if err := s.applier.Apply(env.Ruleset, env.Version); err != nil {
		s.reject(env.Version, env.Checksum, ReasonApply, err)
		s.refuse(env)
		return false
	}
	s.current = env
	if same(env, s.stable) {
		s.setGood(env)
	}
	s.setRunning(env)
	s.m.messages.WithLabelValues("applied").Inc()
	s.clearNack(env.Version)
	s.saveCache(s.cachePath, env)
	r := s.report(env.Version, StatusACK, "", nil)
	r.Checksum = env.Checksum
	s.send(r)
	return true
}

// setGood makes env the last good stable version and keeps it beside the
// cache, for a restart that must return to it: written whenever it
// changes, it never names an older stable version than the one last run
// (kept only while a canary ran, it outlived the stable versions run
// after the canary's promotion, and a restart fell back to it).
func (s *state) setGood(env *rules.Envelope) {
	if same(env, s.good) {
		return
	}
	s.good = env
	s.saveCache(stableCachePath(s.cachePath), env)
}

// saveCache writes env to path, if the cache is enabled.
func (s *state) saveCache(path string, env *rules.Envelope) {
	if s.cachePath == "" {
		return
	}
	data, err := json.Marshal(env)
	if err == nil {
		err = SaveCache(path, data)
	}
	if err != nil {
		s.m.cacheErr.WithLabelValues("save").Inc()
		s.onError(err)
	}
}

// same reports whether a and b are the same envelope: version and content.
func same(a, b *rules.Envelope) bool {
	return a != nil && b != nil && a.Version == b.Version && a.Checksum == b.Checksum
}

// stableCachePath is the file beside the cache that keeps the last stable
// version the instance ran.
func stableCachePath(cachePath string) string { return cachePath + ".stable" }

// refuse remembers env as refused with the NACK just sent, keeping at most
// maxRefused envelopes (the lowest go first).
func (s *state) refuse(env *rules.Envelope) {
	if s.refused == nil {
		s.refused = make(map[envelopeID]*Report)
	}
	id := idOf(env)
	if _, ok := s.refused[id]; !ok && len(s.refused) >= maxRefused {
		lowest := id
		for r := range s.refused {
			if r.version < lowest.version {
				lowest = r
			}
		}
		delete(s.refused, lowest)
	}
	s.mu.Lock()
	nack := s.lastNack
	s.mu.Unlock()
	s.refused[id] = nack
}

// reject NACKs a version; checksum is that of the refused content, "" when
// the payload did not give one that holds.
func (s *state) reject(version int64, checksum string, reason Reason, err error) {
	s.m.messages.WithLabelValues("rejected").Inc()
	s.m.rejected.WithLabelValues(string(reason)).Inc()
	r := s.report(version, StatusNACK, reason, err)
	r.Checksum = checksum
	s.mu.Lock()
	s.lastNack = r
	s.mu.Unlock()
	s.send(r)
}

// clearNack forgets the last NACK once a version at least as new as the
// refused one is applied (any version, for a NACK that named none): the
// instance has moved past it, and heartbeats that kept repeating it made a
// ledger that had not recorded it (a new record, one forgotten while the
// instance was away) mark the instance NACKED for a later target.
func (s *state) clearNack(applied int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastNack != nil && applied >= s.lastNack.Version {
		s.lastNack = nil
	}
}

// nack returns the last NACK (version, reason, error), if any.
func (s *state) nack() (int64, Reason, string) {
	v, reason, msg, _ := s.nackContent()
	return v, reason, msg
}

// nackContent returns the last NACK (version, reason, error and the
// checksum of the refused content), if any.
func (s *state) nackContent() (int64, Reason, string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastNack == nil {
		return 0, "", "", ""
	}
	return s.lastNack.Version, s.lastNack.Reason, s.lastNack.Error, s.lastNack.Checksum
}

func (s *state) report(version int64, st Status, reason Reason, err error) *Report {
	running, sum := s.runningContent()
	r := &Report{Service: s.service, Instance: s.instance, Version: version, Status: st,
		Reason: reason, Running: running, RunningChecksum: sum, Labels: s.labels, At: s.now()}
	if err != nil {
		r.Error = cutError(err.Error())
	}
	return r
}

// decodeEnvelope checks a stable value: size, JSON, envelope, service.
func (s *state) decodeEnvelope(data []byte) (*rules.Envelope, Reason, error) {
	if len(data) > s.maxBytes {
		return nil, ReasonOversized, fmt.Errorf("%w: payload is %d bytes, at most %d allowed", rules.ErrInvalid, len(data), s.maxBytes)
	}
	if !json.Valid(data) {
		return nil, ReasonNotJSON, fmt.Errorf("%w: payload is not JSON", rules.ErrInvalid)
	}
	env, err := rules.DecodeEnvelope(data)
	if err != nil {
		return nil, classify(err), err
	}
	if env.Service != s.service {
		return nil, ReasonWrongService, wrongService(env.Service, s.service)
	}
	return env, "", nil
}

func wrongService(got, want string) error {
	return fmt.Errorf("%w: service: version is for service %q, this instance runs %q", rules.ErrInvalid, got, want)
}

// classify maps a decoding error to a NACK reason.
func classify(err error) Reason {
	var ve *rules.ValidationError
	if !errors.As(err, &ve) {
		return ReasonInvalid
	}
	for _, fe := range ve.Errors {
		switch fe.Field {
		case "checksum":
			return ReasonChecksum
		case "service":
			return ReasonWrongService
		}
	}
	return ReasonInvalid
}

// versionOf reads the version of a refused payload, or 0.
func versionOf(data []byte) int64 {
	var probe struct {
		Version int64 `json:"version"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.Version < 0 {
		return 0
	}
	return probe.Version
}
