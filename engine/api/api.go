package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
)

// Evaluations is the evaluator's read side.
type Evaluations interface {
	Scores() []loadscore.Score
	Recommendations() []recommend.Recommendation
	LastTick() time.Time
}

// Ledger is the delivery ledger's read side.
type Ledger interface {
	Instances(ctx context.Context, service string) ([]distribution.Instance, error)
}

// Guardrails is the guardrail's read side.
type Guardrails interface {
	Decisions() []guardrail.Decision
}

// Levels gives the p99 latency levels the engine compares a service's
// readings with (evaluate.AlertLevels.P99Levels over the recommender's
// learned baselines); ok false when the service has none.
type Levels func(service string) (LatencyLevels, bool)

// AlertLevels gives the alert levels in force for a service, per signal
// (*evaluate.Evaluator.AlertLevelsInForce); nil when it is not compared.
type AlertLevels func(service string) []evaluate.SignalLevels

// Relay lists the rule versions the relay gave up delivering, as the rules
// store records them (*distribution.Plane): not superseded yet, newest
// first, of one service unless service is empty.
type Relay interface {
	Undeliverable(ctx context.Context, service string) ([]distribution.Undeliverable, error)
}

// Options wire the handler. Evaluations and Versions are required; the
// others may be nil (their endpoints answer empty lists).
type Options struct {
	Evaluations Evaluations
	Versions    versioning.Reader
	Ledger      Ledger
	Guardrails  Guardrails
	Events      *events.Recorder
	Levels      Levels
	AlertLevels AlertLevels
	Relay       Relay
	Gatherer    prometheus.Gatherer
	// Ready reports why the engine is not ready (nil: ready).
	Ready func() error
	// Timeout bounds each request to the read API: a store or ledger that
	// stops answering fails the request with 503 instead of holding it
	// (and a database connection) until the client gives up. Default
	// DefaultTimeout; negative: none.
	Timeout time.Duration
	Logger  *slog.Logger
}

// DefaultTimeout is the default of Options.Timeout.
const DefaultTimeout = 10 * time.Second

// Service is one service in the API.
type Service struct {
	Service       string           `json:"service"`
	Score         *loadscore.Score `json:"score"`
	ActiveVersion int64            `json:"active_version"`
	// Pending counts proposals awaiting a decision.
	Pending        int                        `json:"pending"`
	Instances      map[distribution.State]int `json:"instances"`
	Recommendation *recommend.Recommendation  `json:"recommendation,omitempty"`
	// LatencyLevels are the p99 levels the engine alerts on; absent when
	// the service has none (alert levels disabled, or a learned baseline
	// still inconclusive).
	LatencyLevels *LatencyLevels `json:"latency_levels,omitempty"`
	// AlertLevels are the levels in force per signal (p99 latency, error
	// ratio), where each comes from and the baseline learned ones come
	// from; absent when the service is not compared.
	AlertLevels []AlertLevel `json:"alert_levels,omitempty"`
	// Undeliverable lists the service's versions the relay gave up on
	// (too large for the NATS max payload, or refused by the server).
	Undeliverable []distribution.Undeliverable `json:"undeliverable,omitempty"`
}

// LatencyLevels are a service's p99 latency alert levels, in seconds.
type LatencyLevels struct {
	Warn     float64 `json:"warn"`
	Critical float64 `json:"critical"`
	// Source is "configured" (engine configuration) or "learned" (from the
	// service's healthy baseline).
	Source string `json:"source"`
}

// AlertLevel is the alert levels of one signal of a service.
type AlertLevel struct {
	// Signal is "latency_p99" (levels and baseline in seconds) or
	// "error_ratio" (ratios).
	Signal string `json:"signal"`
	// InForce is false when the signal has no levels yet (learned ones
	// while the baseline is inconclusive, without configured floors).
	InForce bool `json:"in_force"`
	// Warn and Critical are the levels: above Warn a P2 alert, above
	// Critical a P1; null when not in force.
	Warn     *float64 `json:"warn"`
	Critical *float64 `json:"critical"`
	// Source is what the level events say: "learned" when a level came
	// from the baseline, else "configured".
	Source string `json:"source"`
	// WarnFrom and CriticalFrom say where each level comes from:
	// "learned" (the healthy baseline), "floor" (the configured floor of
	// a learned level, above it or while it is learning), "configured"
	// (the engine's configuration) or "override" (the service's own
	// levels); absent when not in force.
	WarnFrom     string `json:"warn_from,omitempty"`
	CriticalFrom string `json:"critical_from,omitempty"`
	// Learned: the levels are learned from the healthy baseline (or are
	// floors of learned ones). Baseline is its median (p99 seconds or
	// error ratio), null while it is inconclusive or when nothing is
	// learned; Samples its healthy intervals, of Needed for a conclusive
	// baseline.
	Learned  bool     `json:"learned"`
	Baseline *float64 `json:"baseline"`
	Samples  int      `json:"samples"`
	Needed   int      `json:"needed,omitempty"`
}

// AlertLevelsOf converts the evaluator's levels: unknown numbers (levels
// not in force, a baseline still learning) are nil.
func AlertLevelsOf(in []evaluate.SignalLevels) []AlertLevel {
	if len(in) == 0 {
		return nil
	}
	num := func(v float64, ok bool) *float64 {
		if !ok {
			return nil
		}
		return &v
	}
	out := make([]AlertLevel, 0, len(in))
	for _, v := range in {
		out = append(out, AlertLevel{Signal: v.Signal, InForce: v.InForce, Warn: num(v.Warn, v.InForce), Critical: num(v.Critical, v.InForce),
			Source: v.Source, WarnFrom: v.WarnFrom, CriticalFrom: v.CriticalFrom, Learned: v.Learned,
			Baseline: num(v.Baseline, v.Learned && v.Conclusive), Samples: v.Samples, Needed: v.Needed})
	}
	return out
}

// Prefix is the path prefix of the engine's read API. It is not /api/v1:
// that prefix belongs to the web UI's authenticated API, which the engine
// process serves too in dev mode, and a more specific unauthenticated
// pattern must never shadow it.
const Prefix = "/engine/api/v1"

// Handler returns the engine's HTTP handler.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	s := &server{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.ready)
	if o.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET "+Prefix+"/services", s.services)
	mux.HandleFunc("GET "+Prefix+"/services/{service}", s.service)
	mux.HandleFunc("GET "+Prefix+"/services/{service}/versions", s.versions)
	mux.HandleFunc("GET "+Prefix+"/recommendations", s.recommendations)
	mux.HandleFunc("GET "+Prefix+"/ledger", s.ledger)
	mux.HandleFunc("GET "+Prefix+"/guardrails", s.guardrails)
	mux.HandleFunc("GET "+Prefix+"/events", s.events)
	mux.HandleFunc("GET "+Prefix+"/undeliverable", s.undeliverable)
	return s.bounded(mux)
}

// bounded gives every request a context that ends after Options.Timeout.
func (s *server) bounded(next http.Handler) http.Handler {
	if s.o.Timeout < 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type server struct{ o Options }

func (s *server) ready(w http.ResponseWriter, _ *http.Request) {
	if s.o.Ready != nil {
		if err := s.o.Ready(); err != nil {
			s.fail(w, http.StatusServiceUnavailable, err)
			return
		}
	}
	_, _ = w.Write([]byte("ready\n"))
}

// list returns every service the engine knows. A delivery ledger that
// cannot be read does not fail it: every service's Instances is then nil
// (unknown, not none), and the returned problem says why.
func (s *server) list(ctx context.Context) ([]Service, string, error) {
	byName := map[string]*Service{}
	var order []string
	get := func(name string) *Service {
		if sv := byName[name]; sv != nil {
			return sv
		}
		sv := &Service{Service: name}
		if s.o.Ledger != nil {
			sv.Instances = map[distribution.State]int{}
		}
		byName[name] = sv
		order = append(order, name)
		return sv
	}
	for _, sc := range s.o.Evaluations.Scores() {
		get(sc.Key.Service).Score = &sc
	}
	for _, r := range s.o.Evaluations.Recommendations() {
		get(r.Service).Recommendation = &r
	}
	infos, err := s.o.Versions.Services(ctx)
	if err != nil {
		return nil, "", err
	}
	for _, in := range infos {
		sv := get(in.Name)
		sv.ActiveVersion, sv.Pending = in.Active, in.Pending
	}
	var problem string
	if s.o.Ledger != nil {
		ins, err := s.o.Ledger.Instances(ctx, "")
		if err != nil {
			problem = "delivery ledger: " + err.Error()
		}
		for _, in := range ins {
			get(in.Service).Instances[in.State]++
		}
	}
	if s.o.Relay != nil {
		us, err := s.o.Relay.Undeliverable(ctx, "")
		if err != nil {
			return nil, "", err
		}
		for _, u := range us {
			sv := get(u.Service)
			sv.Undeliverable = append(sv.Undeliverable, u)
		}
	}
	out := make([]Service, 0, len(order))
	for _, name := range order {
		sv := byName[name]
		if problem != "" {
			sv.Instances = nil // not read: unknown, not none
		}
		if s.o.Levels != nil {
			if lv, ok := s.o.Levels(name); ok {
				sv.LatencyLevels = &lv
			}
		}
		if s.o.AlertLevels != nil {
			sv.AlertLevels = AlertLevelsOf(s.o.AlertLevels(name))
		}
		out = append(out, *sv)
	}
	sortServices(out)
	return out, problem, nil
}

func (s *server) services(w http.ResponseWriter, r *http.Request) {
	list, problem, err := s.list(r.Context())
	if err != nil {
		s.error(w, err)
		return
	}
	doc := map[string]any{"services": list, "last_tick": s.o.Evaluations.LastTick()}
	if problem != "" {
		doc["problems"] = []string{problem}
	}
	s.json(w, doc)
}

func (s *server) service(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("service")
	if err := versioning.ValidateService(name); err != nil {
		s.error(w, err)
		return
	}
	list, _, err := s.list(r.Context())
	if err != nil {
		s.error(w, err)
		return
	}
	for _, sv := range list {
		if sv.Service == name {
			s.json(w, sv)
			return
		}
	}
	s.error(w, versioning.ErrNotFound)
}

func (s *server) versions(w http.ResponseWriter, r *http.Request) {
	f := versioning.ListFilter{Service: r.PathValue("service")}
	if err := versioning.ValidateService(f.Service); err != nil {
		s.error(w, err)
		return
	}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			s.fail(w, http.StatusBadRequest, errors.New("limit: want an integer from 1 to 1000"))
			return
		}
		f.Limit = n
	}
	if b := r.URL.Query().Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			s.fail(w, http.StatusBadRequest, errors.New("before: want a version number of 1 or more (the next page starts below it)"))
			return
		}
		f.Before = n
	}
	vs, err := s.o.Versions.List(r.Context(), f)
	if err != nil {
		s.error(w, err)
		return
	}
	if len(vs) == 0 {
		// No versions: a known service without any yet, or no such service.
		list, _, err := s.list(r.Context())
		if err != nil {
			s.error(w, err)
			return
		}
		if !slices.ContainsFunc(list, func(sv Service) bool { return sv.Service == f.Service }) {
			s.error(w, versioning.ErrNotFound)
			return
		}
		vs = []versioning.Version{}
	}
	s.json(w, map[string]any{"versions": vs})
}

func (s *server) recommendations(w http.ResponseWriter, _ *http.Request) {
	s.json(w, map[string]any{"recommendations": s.o.Evaluations.Recommendations()})
}

func (s *server) ledger(w http.ResponseWriter, r *http.Request) {
	ins := []distribution.Instance{} // [] when none, never null
	if s.o.Ledger != nil {
		got, err := s.o.Ledger.Instances(r.Context(), r.URL.Query().Get("service"))
		if err != nil {
			s.error(w, err)
			return
		}
		ins = append(ins, got...)
	}
	s.json(w, map[string]any{"instances": ins})
}

func (s *server) guardrails(w http.ResponseWriter, _ *http.Request) {
	ds := []guardrail.Decision{}
	if s.o.Guardrails != nil {
		ds = append(ds, s.o.Guardrails.Decisions()...)
	}
	s.json(w, map[string]any{"decisions": ds})
}

func (s *server) undeliverable(w http.ResponseWriter, r *http.Request) {
	us := []distribution.Undeliverable{}
	service := r.URL.Query().Get("service")
	if service != "" {
		if err := versioning.ValidateService(service); err != nil {
			s.error(w, err)
			return
		}
	}
	if s.o.Relay != nil {
		got, err := s.o.Relay.Undeliverable(r.Context(), service)
		if err != nil {
			s.error(w, err)
			return
		}
		us = append(us, got...)
	}
	s.json(w, map[string]any{"undeliverable": us})
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	evs := []events.Event{}
	if s.o.Events != nil {
		evs = s.o.Events.Events(events.Kind(r.URL.Query().Get("kind")))
	}
	s.json(w, map[string]any{"events": evs})
}

func (s *server) json(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.o.Logger.Debug("api: write", "err", err)
	}
}

// error maps domain errors to HTTP status codes.
func (s *server) error(w http.ResponseWriter, err error) {
	var in *versioning.InputError
	switch {
	case errors.Is(err, versioning.ErrNotFound):
		s.fail(w, http.StatusNotFound, err)
	case errors.As(err, &in) || errors.Is(err, versioning.ErrInvalid):
		s.fail(w, http.StatusBadRequest, err)
	case errors.Is(err, context.DeadlineExceeded):
		s.o.Logger.Warn("api: request timed out", "timeout", s.o.Timeout, "err", err)
		s.fail(w, http.StatusServiceUnavailable, fmt.Errorf("timed out after %s: %w", s.o.Timeout, err))
	default:
		s.o.Logger.Error("api", "err", err)
		s.fail(w, http.StatusInternalServerError, err)
	}
}

func (s *server) fail(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func sortServices(s []Service) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Service < s[j-1].Service; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
