package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the ledger
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	_ "modernc.org/sqlite" // database/sql driver "sqlite" for the ledger

	alertsconfig "governor.dev/governor/alerts/config"
	alerts "governor.dev/governor/alerts/manager"
	"governor.dev/governor/engine/api"
	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/demo"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/leader"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/signals/promapi"
	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/watch"
	"governor.dev/governor/ui/auth"
)

// ErrStart wraps every failure to start.
var ErrStart = errors.New("app: start")

// Options configure the process.
type Options struct {
	Config config.Config
	// Registry receives every metric and serves /metrics; default a new one
	// with the Go and process collectors.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// Clock drives scrapes and ticks; default clock.Real.
	Clock clock.Clock
	// Stdout receives the banner saying where to look; default discard.
	Stdout io.Writer
	// Events also receives every event (the alerts router, say).
	Events events.Sink
	// DemoServices replace the demo fleet's default services (dev mode).
	DemoServices []demo.Service
	// WebUI serves the web UI (package ui) from the engine's listener;
	// dev mode always does.
	WebUI bool
	// Admin names the UI's first admin, created with a one-time password
	// (printed in the banner) when there are no users; default "admin".
	Admin string
	// BcryptCost of UI passwords; default bcrypt's (tests lower it).
	BcryptCost int
	// Alerts configures the alert rules, routes and receivers; nil: the
	// document Config.Alerts.ConfigFile names, read by New, or without
	// one the built-in rules and a receiver that only logs.
	Alerts *alertsconfig.Config
	// AlertInterval is how often the alerts manager evaluates its rules
	// while this replica leads; default 15s.
	AlertInterval time.Duration
	// ShutdownTimeout bounds a stop: once Run's context ends, the HTTP
	// requests, the background work and the closing of every dependency
	// (the NATS connections drained, the stores closed) get this long in
	// all; what has not finished by then is logged by name and left
	// behind, so that the process exits within Kubernetes' grace period
	// (terminationGracePeriodSeconds, 30s by default) rather than being
	// killed without a word. 0: Config.ShutdownTimeout (shutdown_timeout,
	// 25s by default); negative is refused.
	ShutdownTimeout time.Duration
}

// natsDrainTimeout bounds the drain of a NATS connection at a stop (its
// subscriptions' received messages handled, its publications flushed);
// after it the connection is closed.
const natsDrainTimeout = 5 * time.Second

// DefaultOptions returns the options of a dev stack.
func DefaultOptions() Options { return Options{Config: config.DevDefaults()} }

// App is the running engine.
type App struct {
	o        Options
	cfg      config.Config
	log      *slog.Logger
	recorder *events.Recorder
	sink     events.Sink

	nats     *natsembed.Server
	nc       *nats.Conn
	sdkConn  *nats.Conn
	store    versioning.Store
	ledgerDB *sql.DB
	plane    *distribution.Plane
	metrics  *embedded.Store
	source   signals.Source
	reader   *signals.Reader
	eval     *evaluate.Evaluator
	state    *evaluate.State // nil: state.disabled
	// tickLead is the lead under which this replica ran its last cycle
	// (tick goroutine only): while it lasts no other replica led, so
	// there is nothing new to restore.
	tickLead *leadTerm
	// restored: this replica read the state its predecessor saved at its
	// takeover (tick goroutine only). Until it has, it saves nothing.
	restored bool

	// servicesChecked: the per-service sections of the configuration were
	// compared with the services the engine knows (tick goroutine only).
	servicesChecked bool

	guard   *guardrail.Guard
	elector leader.Elector
	fleet   *demo.Fleet
	names   watch.Names
	alerts  *alerts.Manager
	// alertsLead is the lead the alerts manager follows (stepAlerts);
	// runAlerts goroutine only.
	alertsLead *alertsLead
	routing    *alertRouting
	ui         http.Handler
	stopping   chan struct{} // closed when Run stops serving: ends the UI's live streams
	ln         net.Listener
	// readyTerm is the lead under which this replica last completed a
	// cycle (a LeaderContext): it serves the engine's reads while that lead
	// lasts, and after a lead lost and regained only once a cycle of the
	// new one completed. Written by the tick goroutine.
	readyTerm atomic.Pointer[leadTerm]

	// p99Levels are the p99 alert levels of a service, for the engine API.
	p99Levels api.Levels

	// adminEnsured is what the UI's start did to have an admin, printed
	// once in the banner.
	adminEnsured auth.AdminEnsured
	closers      []closer
	// tickTimeouts counts the cycles cut short at tick_timeout.
	tickTimeouts prometheus.Counter
}

// closer releases one dependency at a stop; name says which in the log
// when it does not finish in time.
type closer struct {
	name string
	f    func()
}

// onClose adds a closer: close runs them newest first.
func (a *App) onClose(name string, f func()) { a.closers = append(a.closers, closer{name: name, f: f}) }

// New validates the configuration and starts the dependencies (NATS, the
// store, the metrics store, the listener); Run runs the loops.
func New(ctx context.Context, o Options) (a *App, err error) {
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	if o.Alerts == nil {
		if o.Alerts, err = LoadAlerts(o.Config.Alerts); err != nil {
			return nil, err
		}
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("app: ShutdownTimeout: must not be negative, got %s", o.ShutdownTimeout)
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = o.Config.ShutdownTimeout // Validate refused 0
	}
	a = &App{o: o, cfg: o.Config, log: o.Logger, recorder: events.NewRecorder(500), stopping: make(chan struct{})}
	a.sink = events.Multi{a.recorder, events.Log{Logger: o.Logger}}
	a.tickTimeouts = promauto.With(o.Registry).NewCounter(prometheus.CounterOpts{Name: "governor_engine_tick_timeouts_total",
		Help: "Evaluation cycles cut short at tick_timeout (reads not answered in time): nothing more proposed, applied or saved."})
	if o.Events != nil {
		a.sink = append(a.sink.(events.Multi), o.Events)
	}
	started := a // the named result is nil once a failed start returns
	defer func() {
		if err != nil {
			started.close()
		}
	}()
	// The address first: a port already taken fails the start before
	// anything is opened, migrated or created (the UI's first admin, whose
	// one-time password only the banner of a start that runs shows).
	if a.ln, err = net.Listen("tcp", a.cfg.Listen); err != nil {
		return nil, fmt.Errorf("%w: listen %s: %w", ErrStart, a.cfg.Listen, err)
	}
	// The stores before NATS: the closers run newest first, so the NATS
	// connection is drained (what its subscriptions received handled,
	// what it published flushed) while the stores are still open.
	if err := a.openStore(ctx); err != nil {
		return nil, err
	}
	if err := a.startNATS(); err != nil {
		return nil, err
	}
	if err := a.startPlane(ctx); err != nil {
		return nil, err
	}
	if err := a.startSignals(); err != nil {
		return nil, err
	}
	if err := a.startAlerts(ctx); err != nil {
		return nil, err
	}
	if err := a.startAlertRouting(ctx); err != nil {
		return nil, err
	}
	a.sink = append(a.sink.(events.Multi), alerts.EngineSink{M: a.alerts})
	if err := a.buildEngine(); err != nil {
		return nil, err
	}
	if a.cfg.Dev {
		if err := a.startFleet(); err != nil {
			return nil, err
		}
	}
	if err := a.setTargets(); err != nil {
		return nil, err
	}
	if a.cfg.Dev || o.WebUI {
		if err := a.startUI(ctx); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *App) startNATS() error {
	url := a.cfg.NATS.URL
	if url == "" {
		opts := natsembed.DefaultOptions()
		if a.cfg.Dev {
			opts.StoreDir = filepath.Join(a.cfg.DataDir, "nats")
		}
		srv, err := natsembed.Start(opts)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStart, err)
		}
		a.nats = srv
		a.onClose("embedded NATS server", func() { srv.Close() })
		url = srv.URL()
	}
	var err error
	names, err := watch.NewNames(a.cfg.NATS.Prefix)
	if err != nil {
		return fmt.Errorf("%w: nats.prefix: %w", ErrStart, err)
	}
	a.names = names
	if a.nc, err = (distribution.ConnOptions{URLs: []string{url}, Name: "governor-engine"}).Connect(); err != nil {
		return fmt.Errorf("%w: nats: %w", ErrStart, err)
	}
	// Drained once, by this closer: after the background work stopped
	// (the relay's and the ledger's last messages among it) and before the
	// stores close, which New opened first.
	nc := a.nc
	a.onClose("NATS connection", func() { drain(nc, natsDrainTimeout) })
	return nil
}

func (a *App) openStore(ctx context.Context) error {
	var err error
	if a.cfg.Database != "" {
		a.store, err = postgres.Open(ctx, postgres.Options{URL: a.cfg.Database, Clock: a.o.Clock, Logger: a.log, Registerer: a.o.Registry})
		if err == nil {
			a.ledgerDB, err = sql.Open("pgx", a.cfg.Database)
		}
		if err == nil {
			err = migrations.Up(ctx, a.ledgerDB, migrations.Postgres)
		}
	} else {
		if err = os.MkdirAll(a.cfg.DataDir, 0o755); err != nil {
			return fmt.Errorf("%w: data_dir: %w", ErrStart, err)
		}
		path := a.cfg.SQLitePath()
		a.store, err = sqlite.Open(ctx, sqlite.Options{Path: path, Clock: a.o.Clock, Logger: a.log, Registerer: a.o.Registry})
		if err == nil {
			// The ledger, the engine state, alerts and UI accounts share one
			// connection beside the store's (see package sqlitedb).
			a.ledgerDB, err = sqlitedb.Open(path, sqlitedb.Options{})
		}
		if err == nil {
			err = migrations.Up(ctx, a.ledgerDB, migrations.SQLite)
		}
	}
	if a.store != nil {
		st := a.store
		a.onClose("rules store", func() { st.Close() })
	}
	if a.ledgerDB != nil {
		db := a.ledgerDB
		a.onClose("rules database", func() { db.Close() })
	}
	if err != nil {
		return fmt.Errorf("%w: rules store: %w", ErrStart, err)
	}
	return nil
}

func (a *App) startPlane(ctx context.Context) error {
	po := distribution.PlaneOptions{Conn: a.nc, Names: a.names, Outbox: a.store, Store: distribution.NewSQLStore(a.ledgerDB),
		Clock: a.o.Clock, Logger: a.log, Registerer: a.o.Registry, TransitionRetention: a.cfg.NATS.TransitionRetention}
	if a.cfg.Dev {
		po.Grace, po.GoneAfter = 10*time.Second, 10*time.Second
	}
	if a.cfg.Database != "" {
		// The listener lives as long as the App, not as New's context.
		lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		a.onClose("outbox listener", stop)
		po.Wake = distribution.ListenPostgres(lctx, distribution.ListenOptions{URL: a.cfg.Database, Logger: a.log})
	}
	var err error
	if a.plane, err = distribution.NewPlane(ctx, po); err != nil {
		return fmt.Errorf("%w: distribution: %w", ErrStart, err)
	}
	return nil
}

func (a *App) startSignals() error {
	if u := a.cfg.Metrics.PrometheusURL; u != "" {
		// An attempt may last the whole cycle (a slow Prometheus that
		// answers is still read), not longer: the query's timeout
		// parameter then has Prometheus give up when the cycle does,
		// rather than evaluate for a cycle that is no longer waiting.
		c, err := promapi.New(promapi.Options{Address: u, Timeout: min(a.cfg.EvalTimeout(), promapi.DefaultOptions().Timeout),
			Clock: a.o.Clock, Logger: a.log, Registerer: a.o.Registry})
		if err != nil {
			return fmt.Errorf("%w: metrics.prometheus_url: %w", ErrStart, err)
		}
		a.source = c
	} else {
		st, err := embedded.NewStore(embedded.Options{Retention: 2 * time.Hour, MaxSeries: a.cfg.Metrics.EmbeddedMaxSeries, Logger: a.log, Registerer: a.o.Registry},
			embedded.ScraperOptions{Interval: a.cfg.Metrics.ScrapeInterval, Timeout: a.cfg.Metrics.ScrapeInterval * 9 / 10,
				Clock: a.o.Clock, Logger: a.log, Registerer: a.o.Registry})
		if err != nil {
			return fmt.Errorf("%w: metrics store: %w", ErrStart, err)
		}
		a.metrics, a.source = st, st
		a.onClose("embedded metrics store", func() { st.Close() })
	}
	maxAge := 2 * time.Minute
	if a.cfg.Dev {
		maxAge = 15 * time.Second
	}
	var err error
	if a.reader, err = signals.NewReader(a.source, signals.ReaderOptions{Window: a.cfg.Metrics.Window, MaxAge: maxAge}); err != nil {
		return fmt.Errorf("%w: signals: %w", ErrStart, err)
	}
	return nil
}

func (a *App) buildEngine() error {
	lo := loadscore.Options{Targets: loadscore.Targets{Latency: a.cfg.Score.Latency}, HalfLife: a.cfg.Score.HalfLife}
	if len(a.cfg.Score.Weights) > 0 {
		lo.Weights = loadscore.Weights{}
		for t, w := range a.cfg.Score.Weights {
			lo.Weights[loadscore.Term(t)] = w
		}
	}
	tracker, err := loadscore.New(lo)
	if err != nil {
		return fmt.Errorf("%w: load_score: %w", ErrStart, err)
	}
	rec, err := recommend.New(RecommendOptions(a.cfg.Recommend))
	if err != nil {
		return fmt.Errorf("%w: recommend: %w", ErrStart, err)
	}
	g := a.cfg.Guardrail
	a.guard, err = guardrail.New(guardrail.Options{Store: a.store, Series: guardrail.SignalSeries{Source: a.source, Reader: a.reader},
		Window: g.Window, Settle: g.Settle, Step: g.Step, MinSamples: g.MinSamples, Alpha: g.Alpha,
		ErrorTolerance: g.ErrorTolerance, LatencyTolerance: g.LatencyTolerance, GoodputTolerance: g.GoodputTolerance, LoadRatio: g.LoadRatio,
		MaxWait: g.MaxWait, Recover: g.Recover, Drift: g.Drift, Actor: recommend.EngineActor(), Events: a.sink, Logger: a.log})
	if err != nil {
		return fmt.Errorf("%w: guardrail: %w", ErrStart, err)
	}
	levels := AlertLevels(a.cfg.AlertLevels)
	a.eval, err = evaluate.New(evaluate.Options{Reader: a.reader, Tracker: tracker, Recommender: rec, Versions: a.store,
		Proposer: NewProposer(a.cfg.Recommend, a.store, a.o.Clock), Guard: a.guard, Fleet: a.plane.Ledger(),
		Breakers: a.source, Band: (&recommend.PolicyBands{Reader: a.store, Fallback: a.band}).Band, Events: a.sink, Logger: a.log, Registerer: a.o.Registry,
		Watermark: evaluate.SQLWatermark{DB: a.ledgerDB, Name: evaluate.EmergencyMark, Leader: a.cfg.Identity},
		Levels:    levels, ForgetAfter: a.cfg.State.MaxAge})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStart, err)
	}
	if !a.cfg.State.Disabled {
		a.state, err = evaluate.NewState(a.eval, evaluate.StateOptions{Store: evaluate.SQLState{DB: a.ledgerDB, Dialect: a.dialect()}, Leader: a.cfg.Identity,
			Every: a.cfg.State.Every, MaxAge: a.cfg.State.MaxAge, Logger: a.log})
		if err != nil {
			return fmt.Errorf("%w: state: %w", ErrStart, err)
		}
	}
	a.p99Levels = func(service string) (api.LatencyLevels, bool) {
		warn, crit, source, ok := levels.P99Levels(service, rec.Thresholds)
		return api.LatencyLevels{Warn: warn, Critical: crit, Source: source}, ok
	}
	if a.cfg.Database != "" {
		lo := LeaderOptions(a.cfg)
		lo.Clock, lo.Events, lo.Logger, lo.Registerer = a.o.Clock, a.sink, a.log, a.o.Registry
		a.elector, err = leader.NewPostgres(lo)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStart, err)
		}
	} else {
		a.elector = leader.NewLocal(a.cfg.Identity, a.o.Registry)
	}
	return nil
}

// LeaderOptions converts the database, identity and leader section of the
// configuration for the Postgres elector; the caller adds the clock,
// events, logger and registerer.
func LeaderOptions(c config.Config) leader.PostgresOptions {
	return leader.PostgresOptions{URL: c.Database, Identity: c.Identity, MaxClockSkew: c.Leader.MaxClockSkew}
}

// RecommendOptions converts the recommend section of the configuration.
func RecommendOptions(r config.Recommend) recommend.Options {
	ro := recommend.DefaultOptions()
	ro.Setpoint, ro.Gains, ro.MinChange, ro.MinScores = r.Setpoint, recommend.Gains{Kp: r.Kp, Ki: r.Ki, Kd: r.Kd}, r.MinChange, r.MinScores
	ro.Deadband, ro.MaxStepPerSecond, ro.Binding = r.Deadband, r.MaxStepPerSecond, r.Binding
	ro.SlowCallMin, ro.SlowCallMax, ro.SlowCallDeadband = r.SlowCallMin, r.SlowCallMax, r.SlowCallDeadband
	t := &ro.Thresholds
	t.MinSamples, t.SlowCallFactor, t.HealthyErrorRatio = r.BaselineSamples, r.SlowCallFactor, r.HealthyErrorRatio
	t.WarnSpreads, t.CriticalSpreads = r.WarnSpreads, r.CriticalSpreads
	return ro
}

// NewProposer is the engine's proposer with the recommend section's
// open_deadband, evidence_refresh (0: refresh at every evaluation) and
// rollback_hold (0: no hold).
func NewProposer(r config.Recommend, store versioning.Store, clk clock.Clock) *recommend.Proposer {
	p := &recommend.Proposer{Store: store, Clock: clk, OpenDeadband: r.OpenDeadband, EvidenceRefresh: r.EvidenceRefresh,
		RollbackHold: r.RollbackHold}
	// The proposer's zeros are its defaults.
	if r.EvidenceRefresh == 0 {
		p.EvidenceRefresh = -1
	}
	if r.RollbackHold == 0 {
		p.RollbackHold = -1
	}
	return p
}

// AlertLevels converts the alert_levels section of the configuration; nil
// when disabled.
func AlertLevels(c config.AlertLevels) *evaluate.AlertLevels {
	if c.Disabled {
		return nil
	}
	l := &evaluate.AlertLevels{LatencyWarn: c.LatencyWarn, LatencyCritical: c.LatencyCritical, LearnedMargin: c.LearnedMargin, ErrorWarn: c.ErrorRatioWarn,
		ErrorCritical: c.ErrorRatioCritical, ErrorLearned: c.ErrorRatioLevels != config.ErrorLevelsConfigured, MinRequestRate: c.MinRequestRate, Refresh: c.Refresh}
	for name, s := range c.Services {
		if l.Services == nil {
			l.Services = map[string]evaluate.LevelOverride{}
		}
		l.Services[name] = evaluate.LevelOverride{Disabled: s.Disabled, LatencyWarn: s.LatencyWarn, LatencyCritical: s.LatencyCritical,
			ErrorWarn: s.ErrorRatioWarn, ErrorCritical: s.ErrorRatioCritical}
	}
	return l
}

// band converts a service's configured band.
func (a *App) band(service string) recommend.Band {
	b, ok := a.cfg.Bands.Services[service]
	if !ok {
		b = a.cfg.Bands.Default
	}
	return recommend.Band{Manual: b.Manual, MaxChangePerHour: b.MaxChangePerHour, Floor: b.Floor, Ceiling: b.Ceiling}
}

func (a *App) startFleet() error {
	url := a.cfg.NATS.URL
	if a.nats != nil {
		url = a.nats.URL()
	}
	conn, err := watch.Connect(url, nats.Name("governor-demo-fleet"))
	if err != nil {
		return fmt.Errorf("%w: demo: %w", ErrStart, err)
	}
	a.sdkConn = conn
	a.onClose("demo fleet NATS connection", func() { drain(conn, natsDrainTimeout) })
	a.fleet, err = demo.New(demo.Options{Conn: conn, Names: a.names, Services: a.o.DemoServices, Instances: a.cfg.Demo.Instances, Period: a.cfg.Demo.Period,
		Heartbeat: 2 * time.Second, Traffic: true, Logger: a.log})
	if err != nil {
		return fmt.Errorf("%w: demo: %w", ErrStart, err)
	}
	// Closed before its connection: a start that fails later releases its
	// listeners and governors, and a stop waits for its servers.
	f := a.fleet
	a.onClose("demo fleet", func() { _ = f.Close() })
	return nil
}

func (a *App) setTargets() error {
	if a.metrics == nil {
		return nil
	}
	var ts []embedded.Target
	if a.fleet != nil {
		for _, ep := range a.fleet.Endpoints() {
			ts = append(ts, embedded.Target{URL: ep.URL + "/metrics", Job: "demo", Labels: map[string]string{"instance": ep.Instance}})
		}
	}
	for _, u := range a.cfg.Metrics.Targets {
		ts = append(ts, embedded.Target{URL: u})
	}
	if err := a.metrics.SetTargets(ts); err != nil {
		return fmt.Errorf("%w: metrics.targets: %w", ErrStart, err)
	}
	return nil
}

// Addr is the address the HTTP server listens on.
func (a *App) Addr() string { return a.ln.Addr().String() }

// Store is the rules store.
func (a *App) Store() versioning.Store { return a.store }

// Evaluator is the evaluation cycle.
func (a *App) Evaluator() *evaluate.Evaluator { return a.eval }

// Guard is the guardrail.
func (a *App) Guard() *guardrail.Guard { return a.guard }

// Ledger is the delivery ledger.
func (a *App) Ledger() *distribution.Ledger { return a.plane.Ledger() }

// Events are the recorded events.
func (a *App) Events() *events.Recorder { return a.recorder }

// Fleet is the demo fleet (nil outside dev mode).
func (a *App) Fleet() *demo.Fleet { return a.fleet }

// Alerts is the alerts manager.
func (a *App) Alerts() *alerts.Manager { return a.alerts }

// Elector is the leader elector.
func (a *App) Elector() leader.Elector { return a.elector }

// Run runs everything until ctx ends, then stops cleanly and releases every
// resource, within Options.ShutdownTimeout (what has not finished by then
// is logged and left behind). It returns nil after a clean stop.
func (a *App) Run(ctx context.Context) error {
	var stopBy time.Time // the shutdown deadline, once the stop began
	defer func() { a.closeBy(stopBy) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Go(func() {
		if err := a.plane.Run(ctx); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("app: distribution: %w", err)
		}
	})
	if a.metrics != nil {
		wg.Go(func() { _ = a.metrics.Run(ctx) })
	}
	if a.fleet != nil {
		wg.Go(func() { _ = a.fleet.Run(ctx) })
		wg.Go(func() { a.runDemo(ctx) })
	}
	wg.Go(func() { _ = a.elector.Run(ctx) })
	wg.Go(func() {
		leader.RunTicks(ctx, a.elector, a.o.Clock, a.cfg.Interval, a.runTick, leader.WithLogger(a.log))
	})
	wg.Go(func() { a.runAlerts(ctx) })
	engine := api.Handler(api.Options{Evaluations: a.eval, Versions: a.store, Ledger: a.plane.Ledger(),
		Guardrails: a.guard, Events: a.recorder, Levels: a.p99Levels, AlertLevels: a.eval.AlertLevelsInForce, Relay: a.plane, Gatherer: a.o.Registry,
		Ready: a.readiness, Logger: a.log})
	srv := &http.Server{Handler: combine(engine, a.ui), ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout: 2 * time.Minute} // idle keep-alive connections are dropped, not kept forever
	wg.Go(func() {
		if err := srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("app: http: %w", err)
		}
	})
	a.banner()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stopBy = time.Now().Add(a.o.ShutdownTimeout)
	cancel()
	close(a.stopping) // the UI's live streams would hold Shutdown to its timeout
	shut, scancel := context.WithDeadline(context.Background(), earliest(time.Now().Add(shutdownGrace), stopBy))
	if err := srv.Shutdown(shut); err != nil {
		// Requests still running (a read the database does not answer)
		// would hold their connections, and the pools closed below, past
		// the grace: closing their connections ends their contexts.
		a.log.Warn("http: requests still running after the shutdown grace: closing their connections", "grace", shutdownGrace)
		_ = srv.Close()
	}
	scancel()
	if !within(stopBy, wg.Wait) {
		a.log.Warn("shutdown: background work still running at the shutdown deadline: closing the dependencies under it",
			"shutdown_timeout", a.o.ShutdownTimeout)
	}
	// The deferred closeBy releases the dependencies: the NATS
	// connection's drain among them, before the stores close.
	a.log.Info("engine stopped")
	return err
}

// within runs f and waits for it until deadline (none when zero); false
// when f was still running then (it runs on, left behind).
func within(deadline time.Time, f func()) bool {
	if deadline.IsZero() {
		f()
		return true
	}
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// drain closes a NATS connection after draining it: the messages its
// subscriptions already received are handled and what it published is
// flushed; a drain that has not ended after timeout (or cannot start) is
// cut short by Close.
func drain(nc *nats.Conn, timeout time.Duration) {
	if nc.IsClosed() {
		return
	}
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	end := time.Now().Add(timeout)
	for !nc.IsClosed() && time.Now().Before(end) {
		time.Sleep(5 * time.Millisecond)
	}
	nc.Close()
}

// errTickTimeout ends the context of a cycle that reached its
// tick_timeout.
var errTickTimeout = errors.New("app: evaluation cycle reached tick_timeout")

// runTick runs the cycle of tick at (leader.RunTicks) until tick_timeout
// after at on the engine's clock, so that a dependency that does not
// answer (a hung Prometheus, a rules database that does not answer)
// costs one cycle, not the client's every attempt and retry and the ticks
// skipped meanwhile; see tick for what a cycle cut short does.
func (a *App) runTick(ctx context.Context, at time.Time) {
	ctx, cancel := withDeadline(ctx, a.o.Clock, at.Add(a.cfg.EvalTimeout()), errTickTimeout)
	defer cancel()
	a.tick(ctx, at)
}

// withDeadline is ctx, ended with cause at deadline on clk: the
// context's own deadline on the real clock, a timer of clk otherwise
// (a fake clock in tests).
func withDeadline(ctx context.Context, clk clock.Clock, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	if _, ok := clk.(clock.Real); ok {
		return context.WithDeadlineCause(ctx, deadline, cause)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := clk.NewTimer(deadline.Sub(clk.Now()))
	go func() {
		select {
		case <-t.C():
			cancel(cause)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// timedOut reports whether ctx, a cycle's, ended at its tick_timeout.
func timedOut(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errTickTimeout) }

// tick runs one evaluation cycle under the lead context (leader.RunTicks).
// At a takeover (the first cycle, or the first since the lead under which
// the last one ran ended; not one after ticks a cycle of this lead
// outlasted) it first restores the state the leader before it saved; after every
// cycle it saves its share. A restore that fails (the store could not be
// read) is tried again every cycle, and until one succeeds the replica
// saves nothing: its own unrestored state, saved as newer, would replace
// what the leader before it learned (baselines, controllers, events
// already reported). A cycle in which the lead ended saves nothing either,
// whatever the state store does with an ended context, and the replica
// restores again before its next cycle: another may have led meanwhile.
//
// The cycle's writes to the rules store (proposals, auto-applied versions,
// the guardrail's rollbacks) carry the fence of the tick (versioning.Fence):
// the store refuses them (versioning.ErrFenced) once a later tick has been
// claimed, so a replica that lost the lead while the cycle ran (a pause
// longer than its lease, before its lead context noticed) changes nothing
// after its successor's cycles. The SQLite store, whose single engine
// claims its ticks in memory, ignores the fence.
//
// A cycle whose context ends at its tick_timeout (runTick) is cut short:
// its reads and writes fail from then on, so it proposes, applies and
// rolls back nothing more (what it wrote before was decided on the reads
// it had completed; a signal read cut short leaves those signals unknown
// for the cycle, and a cycle whose every query was cut short publishes
// nothing). It is logged and counted (governor_engine_tick_timeouts_total),
// saves no state and does not make the replica ready; the lead goes on, so
// the next cycle saves without restoring first.
func (a *App) tick(ctx context.Context, at time.Time) {
	ctx = versioning.WithFence(ctx, versioning.Fence{Tick: at, Holder: a.elector.Identity()})
	if a.newLead() {
		// What this replica restored under an earlier lead is stale: until
		// a restore under this one succeeds, nothing is saved (a cycle
		// whose context has already ended restores nothing).
		a.restored = false
	}
	if a.state != nil && ctx.Err() == nil && !a.restored {
		_, err := a.state.Restore(ctx, at)
		a.restored = err == nil
		if err != nil {
			a.log.Warn("engine state not restored: retried next cycle, nothing saved meanwhile", "tick", at, "err", err)
		}
	}
	res, err := a.eval.Tick(ctx, at)
	switch {
	case a.state == nil || !a.restored:
	case timedOut(ctx):
		// Not saved: the next cycle saves what this one learned.
	case ctx.Err() != nil:
		a.restored = false
		a.log.Warn("the lead ended during the cycle: engine state not saved", "tick", at, "cause", context.Cause(ctx))
	default:
		if _, err := a.state.Save(ctx, at); errors.Is(err, evaluate.ErrSuperseded) {
			a.restored = false
			a.log.Warn("engine state not saved: another replica claimed a later cycle", "tick", at, "err", err)
		} else if err != nil {
			a.log.Warn("engine state not saved", "tick", at, "err", err)
		}
	}
	if errors.Is(err, versioning.ErrFenced) {
		// Another replica claimed a later tick: it leads, and restored
		// before its cycle. This one restores again if it leads again.
		a.restored = false
		a.log.Warn("not leading any more: the cycle's writes to the rules store were refused", "tick", at, "err", err)
	} else if timedOut(ctx) {
		a.tickTimeouts.Inc()
		a.log.Warn("evaluation cycle cut short at tick_timeout: its reads did not answer in time; nothing more proposed, applied or saved, the next cycle runs on time",
			"tick", at, "tick_timeout", a.cfg.EvalTimeout(), "err", err)
	} else if err != nil {
		a.log.Warn("evaluation", "tick", at, "err", err)
	}
	if !a.servicesChecked && len(res.Scores) > 0 && ctx.Err() == nil {
		a.checkConfiguredServices(ctx, res.Scores)
	}
	for _, s := range res.Submitted {
		a.log.Info("recommendation", "service", s.Version.Service, "version", s.Version.Number, "auto_applied", s.AutoApplied,
			"policy", s.Policy, "reason", s.Version.Reason)
	}
	if (err == nil || len(res.Scores) > 0) && ctx.Err() == nil {
		a.cycleCompleted()
	}
}

// newLead reports whether the lead under which the last cycle ran has
// ended since (true at the first cycle too), and follows the lead in force
// from now on. Another replica can only have led, and saved state, in
// between; a cycle that outlasted its interval under one lead is no
// takeover.
func (a *App) newLead() bool {
	var ended bool
	a.tickLead, ended = a.follow(a.tickLead)
	return ended
}

// checkConfiguredServices warns, at the first cycle that scored services,
// of the per-service sections of the configuration naming a service that
// neither the cycle's signals nor the rules store know. A store that
// cannot be read defers the check to the next cycle.
func (a *App) checkConfiguredServices(ctx context.Context, scores []loadscore.Score) {
	if len(a.cfg.ServiceKeys()) == 0 {
		a.servicesChecked = true
		return
	}
	infos, err := a.store.Services(ctx)
	if err != nil {
		return
	}
	a.servicesChecked = true
	known := make(map[string]bool, len(scores)+len(infos))
	for _, s := range scores {
		known[s.Key.Service] = true
	}
	for _, i := range infos {
		known[i.Name] = true
	}
	a.warnUnknownServices(func(service string) bool { return known[service] })
}

// warnUnknownServices logs each per-service entry of the configuration
// whose service known does not know: most likely a misspelling, whose
// settings never apply.
func (a *App) warnUnknownServices(known func(service string) bool) {
	for _, k := range a.cfg.ServiceKeys() {
		if !known(k.Service) {
			a.log.Warn("the configuration names a service the engine does not know (not in the signals nor the rules store): its settings apply only once such a service appears; check the spelling",
				"field", k.Field, "service", k.Service)
		}
	}
}

// leadTerm is a lead of this replica: ctx ends when it does.
type leadTerm struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// follow returns t while its lead lasts; once it has ended (or without
// one), t is released and follow returns the lead in force now, ended at
// once when this replica does not lead, and true.
func (a *App) follow(t *leadTerm) (_ *leadTerm, ended bool) {
	if t != nil {
		if t.ctx.Err() == nil {
			return t, false
		}
		t.cancel()
	}
	ctx, cancel := a.elector.LeaderContext(context.Background())
	return &leadTerm{ctx: ctx, cancel: cancel}, true
}

// cycleCompleted records that a cycle completed under the current lead:
// the replica is ready until that lead ends.
func (a *App) cycleCompleted() {
	if t, ended := a.follow(a.readyTerm.Load()); ended {
		a.readyTerm.Store(t)
	}
}

// cycledThisLead reports whether a cycle completed under the lead in
// force.
func (a *App) cycledThisLead() bool {
	t := a.readyTerm.Load()
	return t != nil && t.ctx.Err() == nil
}

// readiness answers /readyz: nil while this replica serves the engine's
// reads. It needs NATS and the rules database to answer (checked on every
// call, so a ready replica turns unready while either is down), the lead,
// and one evaluation cycle completed under the lead in force. A standby is
// not ready: the load scores and recommendations the engine API and UI show
// are the leader's (kept in its memory), so a load balancer must send the
// reads to the leader alone; a standby turns ready after its first cycle as
// the leader, and so does a leader that lost the lead and took it back
// (what it kept in memory is as old as its last lead).
func (a *App) readiness() error {
	if !a.nc.IsConnected() {
		return errors.New("not connected to NATS")
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyPing)
	defer cancel()
	if err := a.ledgerDB.PingContext(ctx); err != nil {
		return fmt.Errorf("rules database: %w", err)
	}
	switch {
	case !a.elector.IsLeader():
		return errors.New("standby: another replica leads, and serves the load scores and recommendations")
	case !a.cycledThisLead():
		return errors.New("no evaluation cycle has completed yet under the current lead")
	}
	return nil
}

// shutdownGrace bounds the wait for running HTTP requests at a stop.
const shutdownGrace = 5 * time.Second

// readyPing bounds the database check of /readyz.
const readyPing = 2 * time.Second

func (a *App) banner() {
	base := "http://" + a.Addr()
	fmt.Fprintf(a.o.Stdout, "Governor engine running (identity %s, %s).\n", a.cfg.Identity, mode(a.cfg))
	if a.ui != nil {
		fmt.Fprintf(a.o.Stdout, "  web UI:                 %s/\n", base)
		if b := a.adminEnsured.Banner(); b != "" {
			// Indented like the rest of the banner; the password once.
			fmt.Fprint(a.o.Stdout, "  "+strings.ReplaceAll(strings.TrimSuffix(b, "\n"), "\n", "\n  ")+"\n")
			a.adminEnsured = auth.AdminEnsured{}
		}
	}
	fmt.Fprintf(a.o.Stdout, "  services, load scores:  %s/engine/api/v1/services\n", base)
	fmt.Fprintf(a.o.Stdout, "  recommendations:        %s/engine/api/v1/recommendations\n", base)
	fmt.Fprintf(a.o.Stdout, "  rule versions:          %s/engine/api/v1/services/<service>/versions\n", base)
	fmt.Fprintf(a.o.Stdout, "  delivery ledger (ACKs): %s/engine/api/v1/ledger\n", base)
	fmt.Fprintf(a.o.Stdout, "  guardrail decisions:    %s/engine/api/v1/guardrails\n", base)
	fmt.Fprintf(a.o.Stdout, "  events:                 %s/engine/api/v1/events\n", base)
	fmt.Fprintf(a.o.Stdout, "  metrics, health:        %s/metrics  %s/healthz  %s/readyz\n", base, base, base)
	if a.fleet != nil {
		for _, ep := range a.fleet.Endpoints() {
			fmt.Fprintf(a.o.Stdout, "  demo %-8s %-11s %s/api/work\n", ep.Service, ep.Instance, ep.URL)
		}
		fmt.Fprintln(a.o.Stdout, "Demo: incidents recur every period (spike on checkout, slow downstream on catalog, capacity drop on search);")
		fmt.Fprintln(a.o.Stdout, "      search is manual (its proposals wait for approval); a bad catalog version is published once and rolled back.")
	}
	fmt.Fprintln(a.o.Stdout, "Stop with Ctrl-C.")
}

func mode(c config.Config) string {
	s := "SQLite in " + c.DataDir
	if c.Database != "" {
		s = "PostgreSQL"
	}
	if c.NATS.URL == "" {
		s += ", embedded NATS"
	}
	if c.Metrics.PrometheusURL == "" {
		s += ", embedded metrics store"
	}
	if c.Dev {
		s += ", demo fleet"
	}
	return s
}

// close releases everything New started, newest first.
func (a *App) close() { a.closeBy(time.Time{}) }

// closeBy releases everything New started, newest first, until deadline
// (none when zero): a closer still running then is logged by name with
// those not run yet, and left behind, so that the process can exit.
func (a *App) closeBy(deadline time.Time) {
	for i := len(a.closers) - 1; i >= 0; i-- {
		if !within(deadline, a.closers[i].f) {
			var left []string
			for j := i - 1; j >= 0; j-- {
				left = append(left, a.closers[j].name)
			}
			a.log.Error("shutdown: not finished at the shutdown deadline: left behind", "closing", a.closers[i].name,
				"not_closed", left, "shutdown_timeout", a.o.ShutdownTimeout)
			break
		}
	}
	a.closers = nil
	if a.ln != nil {
		a.ln.Close()
	}
	if t := a.readyTerm.Swap(nil); t != nil {
		t.cancel()
	}
	if t := a.tickLead; t != nil {
		t.cancel()
	}
}
