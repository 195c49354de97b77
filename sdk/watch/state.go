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
	stable  *rules.Envelope // latest valid stable version seen
	canary  *Canary         // current valid canary record, if any
	refused int64           // last version the applier refused: not retried

	mu       sync.Mutex // guards lastNack, read by heartbeats
	lastNack *Report    // nil once a version at least as new is applied
}

// loadCache applies the cached last-known-good version, if any. It may be a
// canary version: settle leaves it once the watch shows that no canary
// selecting this instance holds it any more.
func (s *state) loadCache() {
	if s.cachePath == "" {
		return
	}
	env, err := LoadCache(s.cachePath, s.service)
	if err != nil {
		s.m.cacheErr.WithLabelValues("load").Inc()
		s.onError(err)
		return
	}
	if env == nil {
		return
	}
	if err := s.applier.Apply(env.Ruleset, env.Version); err != nil {
		s.m.cacheErr.WithLabelValues("load").Inc()
		s.onError(fmt.Errorf("%w: apply cached version %d: %w", ErrCache, env.Version, err))
		return
	}
	s.setRunning(env.Version)
}

func (s *state) setRunning(v int64) {
	s.running.Store(v)
	s.m.running.Set(float64(v))
}

// onStable handles a value of the stable key.
func (s *state) onStable(data []byte) {
	env, reason, err := s.decodeEnvelope(data)
	if err != nil {
		s.reject(versionOf(data), reason, err)
		return
	}
	if s.stable == nil || env.Version > s.stable.Version {
		s.stable = env
	}
	s.reconcile(env.Version)
}

// onCanary handles a value of the canary key.
func (s *state) onCanary(data []byte) {
	if len(data) > s.maxBytes {
		s.reject(0, ReasonOversized, fmt.Errorf("%w: canary is %d bytes, at most %d allowed", rules.ErrInvalid, len(data), s.maxBytes))
		return
	}
	if !json.Valid(data) {
		s.reject(0, ReasonNotJSON, fmt.Errorf("%w: canary payload is not JSON", rules.ErrInvalid))
		return
	}
	c, err := DecodeCanary(data)
	if err != nil {
		var probe struct {
			Envelope json.RawMessage `json:"envelope"`
		}
		_ = json.Unmarshal(data, &probe)
		s.reject(versionOf(probe.Envelope), classify(err), err)
		return
	}
	if c.Envelope.Service != s.service {
		s.reject(c.Envelope.Version, ReasonWrongService, wrongService(c.Envelope.Service, s.service))
		return
	}
	// The record replaces any previous canary, which this instance may be
	// running: settle first, then move forward to this canary if it selects
	// the instance (reconcile also counts it as ignored if it is older).
	s.canary = c
	s.settle()
	if c.Selector.Selects(s.service, s.instance, s.labels) {
		s.reconcile(c.Envelope.Version)
	}
}

// onCanaryGone handles the deletion of the canary key (promotion or abort),
// also when the state never saw the record: an instance restarted while the
// canary it ran was aborted finds only the deletion.
func (s *state) onCanaryGone() {
	s.canary = nil
	s.settle()
	s.reconcile(0)
}

// settle leaves a running version that nothing stages for this instance any
// more: one above the stable version that no canary selecting this instance
// holds (an aborted canary, a canary replaced by one that does not select
// this instance, or a canary restored from the cache at start that is gone
// since). The instance applies its target version, usually the stable one:
// the one case where it applies a lower version. Without a stable version it
// keeps what it runs, having nothing to return to.
//
// It runs only once the canary key is known (a canary value, its deletion,
// or the end of the watch's initial values): a canary restored from the
// cache would otherwise be left before its record arrives.
func (s *state) settle() {
	cur := s.running.Load()
	if s.stable == nil || s.stable.Version >= cur {
		return
	}
	if c := s.canary; c != nil && c.Envelope.Version == cur && c.Selector.Selects(s.service, s.instance, s.labels) {
		return
	}
	if t := s.target(); t.Version != s.refused {
		s.apply(t)
	}
}

// target is the version this instance should run.
func (s *state) target() *rules.Envelope {
	t := s.stable
	if c := s.canary; c != nil && c.Selector.Selects(s.service, s.instance, s.labels) {
		if t == nil || c.Envelope.Version > t.Version {
			t = c.Envelope
		}
	}
	return t
}

// reconcile applies the target version if it is newer than the running one.
// received is the version that triggered it (0 for none): when it is older
// than the running version it is counted as ignored.
func (s *state) reconcile(received int64) {
	cur := s.running.Load()
	if received > 0 && received < cur {
		s.m.messages.WithLabelValues("ignored").Inc()
	}
	t := s.target()
	if t == nil || t.Version <= cur || t.Version == s.refused {
		return
	}
	s.apply(t)
}

func (s *state) apply(env *rules.Envelope) {
	if err := s.applier.Apply(env.Ruleset, env.Version); err != nil {
		s.refused = env.Version
		s.reject(env.Version, ReasonApply, err)
		return
	}
	s.setRunning(env.Version)
	s.m.messages.WithLabelValues("applied").Inc()
	s.clearNack(env.Version)
	if s.cachePath != "" {
		data, err := json.Marshal(env)
		if err == nil {
			err = SaveCache(s.cachePath, data)
		}
		if err != nil {
			s.m.cacheErr.WithLabelValues("save").Inc()
			s.onError(err)
		}
	}
	s.send(s.report(env.Version, StatusACK, "", nil))
}

func (s *state) reject(version int64, reason Reason, err error) {
	s.m.messages.WithLabelValues("rejected").Inc()
	s.m.rejected.WithLabelValues(string(reason)).Inc()
	r := s.report(version, StatusNACK, reason, err)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastNack == nil {
		return 0, "", ""
	}
	return s.lastNack.Version, s.lastNack.Reason, s.lastNack.Error
}

func (s *state) report(version int64, st Status, reason Reason, err error) *Report {
	r := &Report{Service: s.service, Instance: s.instance, Version: version, Status: st,
		Reason: reason, Running: s.running.Load(), Labels: s.labels, At: s.now()}
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
