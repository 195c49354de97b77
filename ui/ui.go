package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/api"
	"governor.dev/governor/ui/assets"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/pages"
)

// ErrInvalid: bad Options.
var ErrInvalid = errors.New("ui: invalid options")

// Options configure New.
type Options struct {
	// Rules is the rules store; required.
	Rules versioning.Store
	// Auth holds users, sessions and tokens; required (see auth.New).
	Auth *auth.Manager
	// Fleet (live service state) and Alerts may be nil: the pages say they
	// are not configured.
	Fleet  model.Fleet
	Alerts model.Alerts
	// Rollouts enables canary publish, promote and abort on the rules page.
	Rollouts model.Rollouts
	// Charts draws the service page's signal charts (see ui/signalsource).
	Charts model.Charts
	// AlertRouting enables editing the alerting configuration on the
	// settings page (nil: the page says it is not configured here);
	// AlertBootstrap is the engine's configuration file document, shown
	// while no version has been saved. ConfigBand gives the engine's
	// configured auto-apply band shown where a policy sets none.
	AlertRouting   model.AlertRouting
	AlertBootstrap string
	ConfigBand     model.ConfigBand
	// AlertService serves silences by matchers (listed, edited and expired
	// as Alertmanager's API does) and alert history through the API, and
	// lists the silences with an expire form on the alerts page; nil:
	// those routes answer 503 (see api.Options.AlertService) and the page
	// lists none.
	AlertService *alertsapi.Service
	Clock        clock.Clock
	Logger       *slog.Logger
	// Registerer receives the UI's request metrics; nil for none.
	Registerer prometheus.Registerer
	// TrustedOrigins are extra origins (scheme://host[:port]) allowed to send
	// cross-origin state-changing requests, e.g. behind a proxy that rewrites
	// Host. Same-origin requests are always allowed.
	TrustedOrigins []string
	// LiveInterval is how often the overview stream updates; default 2s.
	LiveInterval time.Duration
	// Stopping, once closed, ends the live streams (the overview's events),
	// which otherwise run as long as their clients: close it before the
	// server's Shutdown, which waits for every request. nil: never.
	Stopping <-chan struct{}
}

// CSP is the Content-Security-Policy of every response: scripts and styles
// only from this origin's files, no inline code, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Server is the web UI: its handler, and the work Run does in the
// background while it serves.
type Server struct {
	http.Handler
	checker *versioning.AuditChecker
}

// Run walks the whole audit chain in the background at once and then
// every auditWholeEvery (10 to 12 minutes) until ctx ends, so the
// audit page and GET /api/v1/audit/verify?whole=false never wait for a
// whole walk they did not ask for. Without Run, the first view after a
// whole walk is due walks the chain itself. A broken chain found shows on
// the next view, in governor_ui_audit_chain_ok and in an ERROR log naming
// the entry.
func (s *Server) Run(ctx context.Context) { s.checker.Run(ctx) }

// auditWholeEvery is how often this process walks the whole audit chain:
// versioning.DefaultWholeChainEvery stretched by a random share of at most
// a fifth, drawn once per process. Replicas on one database each walk the
// chain (no replica knows of another's walks); with periods of their own,
// replicas started together drift apart instead of reading the whole log
// at the same moments.
func auditWholeEvery() time.Duration {
	const every = versioning.DefaultWholeChainEvery
	return every + 1 + rand.N(every/5)
}

// New returns the UI's handler; NewServer returns it with its background
// work.
func New(o Options) (http.Handler, error) {
	s, err := NewServer(o)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// NewServer returns the UI; run its Run for as long as it serves.
func NewServer(o Options) (*Server, error) {
	if o.Rules == nil || o.Auth == nil {
		return nil, fmt.Errorf("%w: Rules and Auth are required", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	am, err := newAuditMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	// One checker: a whole walk of the audit chain serves the page and the API.
	checker := versioning.NewAuditChecker(o.Rules, versioning.AuditCheckerOptions{Clock: o.Clock, WholeEvery: auditWholeEvery(),
		OnWhole: func(w versioning.AuditWalk) { am.observe(o.Logger, w) }})
	if err := am.watch(checker); err != nil {
		return nil, err
	}
	pg, err := pages.New(pages.Options{Rules: o.Rules, Auth: o.Auth, AuditChecker: checker, Fleet: o.Fleet, Alerts: o.Alerts, Rollouts: o.Rollouts, Charts: o.Charts,
		AlertRouting: o.AlertRouting, AlertBootstrap: o.AlertBootstrap, ConfigBand: o.ConfigBand, AlertService: o.AlertService, Clock: o.Clock, Logger: o.Logger, LiveInterval: o.LiveInterval, Stopping: o.Stopping})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ap, err := api.New(api.Options{Rules: o.Rules, AuditChecker: checker, Fleet: o.Fleet, Alerts: o.Alerts, Rollouts: o.Rollouts,
		AlertRouting: o.AlertRouting, AlertBootstrap: o.AlertBootstrap, ConfigBand: o.ConfigBand, AlertService: o.AlertService, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	cop := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("%w: TrustedOrigins: %w", ErrInvalid, err)
		}
	}
	onError := func(w http.ResponseWriter, r *http.Request, err error) { httperr.Write(w, r, o.Logger, err) }
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		onError(w, r, fmt.Errorf("%w: cross-origin request refused", auth.ErrCSRF))
	}))
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}

	r := chi.NewRouter()
	// GetHead answers HEAD on every GET route as GET does; net/http sends
	// no body for HEAD.
	r.Use(securityHeaders, recoverer(o.Logger, onError), m.middleware, limitBody, middleware.GetHead)
	r.Handle("/assets/*", http.StripPrefix("/assets", assets.Handler()))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	r.Group(func(r chi.Router) {
		r.Use(cop.Handler, noStore, o.Auth.Middleware(onError))
		r.Route("/api/v1", ap.Routes)
		pg.Routes(r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { onError(w, r, httperr.ErrNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		allowed := strings.Join(api.AllowedMethods(r, req.URL.Path), ", ")
		w.Header().Set("Allow", allowed)
		onError(w, req, fmt.Errorf("%w: %s is not allowed on %s; allowed: %s", httperr.ErrMethodNotAllowed, req.Method, req.URL.Path, allowed))
	})
	return &Server{Handler: r, checker: checker}, nil
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		h.Set("Strict-Transport-Security", "max-age=31536000")
		next.ServeHTTP(w, r)
	})
}

// MaxBody bounds every request body (a ruleset is at most 1 MiB).
const MaxBody = 2 << 20

func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		}
		next.ServeHTTP(w, r)
	})
}

func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a logged 500 without a stack trace in the
// response.
func recoverer(log *slog.Logger, onError auth.ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					log.Error("ui: panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
					onError(w, r, fmt.Errorf("ui: internal error"))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "governor_ui_requests_total", Help: "Requests served by the web UI and API, by route and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "governor_ui_request_duration_seconds", Help: "Server time of web UI and API requests, by route.", Buckets: prometheus.DefBuckets}, []string{"route"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("%w: metrics: %w", ErrInvalid, err)
			}
		}
	}
	return m, nil
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (m *metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		m.requests.WithLabelValues(route, strconv.Itoa(max(sw.code, 200))).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}
