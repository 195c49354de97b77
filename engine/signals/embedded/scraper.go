package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
)

// ScraperOptions configures a Scraper. Zero fields take the defaults of
// DefaultScraperOptions.
type ScraperOptions struct {
	// Interval between the starts of two scrapes of a target. Default 15s.
	Interval time.Duration
	// Timeout bounds one scrape; at most Interval. Default 10s.
	Timeout time.Duration
	// BodyLimit bounds the size of one exposition. Default 16 MiB.
	BodyLimit int64
	// SampleLimit bounds the samples of one scrape; a target that exposes
	// more fails the scrape. Default 50000; negative disables.
	SampleLimit int
	// Client makes the requests. Default: a client with no overall timeout
	// (Timeout bounds each scrape).
	Client *http.Client
	// Clock times scrapes and timeouts. Default clock.Real.
	Clock clock.Clock
	// Logger receives target health changes. Default: discard.
	Logger *slog.Logger
	// Registerer receives the scraper's metrics. Default: not registered.
	Registerer prometheus.Registerer
	// OnScrape, if set, is called after every scrape with the target's new
	// status, from the target's goroutine and outside the scraper's locks.
	OnScrape func(TargetStatus)
}

// DefaultScraperOptions returns the defaults.
func DefaultScraperOptions() ScraperOptions {
	return ScraperOptions{
		Interval:    15 * time.Second,
		Timeout:     10 * time.Second,
		BodyLimit:   16 << 20,
		SampleLimit: 50_000,
	}
}

func (o *ScraperOptions) fill() error {
	d := DefaultScraperOptions()
	if o.Interval < 0 || o.Timeout < 0 || o.BodyLimit < 0 {
		return fmt.Errorf("%w: interval, timeout and body_limit must not be negative", signals.ErrInvalidOption)
	}
	if o.Interval == 0 {
		o.Interval = d.Interval
	}
	if o.Timeout == 0 {
		o.Timeout = min(d.Timeout, o.Interval)
	}
	if o.Timeout > o.Interval {
		return fmt.Errorf("%w: timeout %s exceeds interval %s", signals.ErrInvalidOption, o.Timeout, o.Interval)
	}
	if o.BodyLimit == 0 {
		o.BodyLimit = d.BodyLimit
	}
	if o.SampleLimit == 0 {
		o.SampleLimit = d.SampleLimit
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Scraper scrapes targets into a storage.Appendable, one goroutine per
// target. SetTargets may be called at any time; Run drives the loops.
type Scraper struct {
	app     storage.Appendable
	opts    ScraperOptions
	metrics *scrapeMetrics

	mu    sync.Mutex
	loops map[string]*loop
	ctx   context.Context // set while Run runs
	wg    sync.WaitGroup
	// running: Run starts new targets' loops; active: Run has not returned
	// (it may still be stopping the loops).
	running, active bool
}

// NewScraper returns a scraper writing into app (usually a *DB).
func NewScraper(app storage.Appendable, opts ScraperOptions) (*Scraper, error) {
	if app == nil {
		return nil, fmt.Errorf("%w: appendable is nil", signals.ErrInvalidOption)
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Scraper{app: app, opts: opts, loops: map[string]*loop{}}
	s.metrics = newScrapeMetrics(opts.Registerer, s.countHealth)
	return s, nil
}

// SetTargets replaces the target set. The whole set is validated first: on
// error nothing changes. Targets that stay keep their loops and state; new
// ones start (if Run is running); removed ones stop and get staleness
// markers for all their series.
func (s *Scraper) SetTargets(targets []Target) error {
	valid, err := validateTargets("targets", targets)
	if err != nil {
		return err
	}
	s.mu.Lock()
	var stopped []*loop
	for k, l := range s.loops {
		if _, keep := valid[k]; !keep {
			delete(s.loops, k)
			stopped = append(stopped, l)
		}
	}
	for _, t := range targets {
		ls, _ := t.targetLabels()
		k := t.URL + ls.String()
		if _, ok := s.loops[k]; ok {
			continue
		}
		l := newLoop(s, t.URL, ls)
		s.loops[k] = l
		if s.running {
			s.start(l)
		}
	}
	s.mu.Unlock()
	for _, l := range stopped {
		l.stop(true)
	}
	return nil
}

// Run scrapes until ctx is done, then stops every loop and returns. Series
// are not marked stale on shutdown (as in Prometheus), only on removal. Once
// it has returned, Run may be called again and resumes every target.
func (s *Scraper) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.active {
		s.mu.Unlock()
		return fmt.Errorf("embedded: scraper already running")
	}
	s.active, s.running, s.ctx = true, true, ctx
	for _, l := range s.loops {
		s.start(l)
	}
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.running = false
	loops := make([]*loop, 0, len(s.loops))
	for _, l := range s.loops {
		loops = append(loops, l)
	}
	s.mu.Unlock()
	for _, l := range loops {
		l.stop(false)
	}
	s.wg.Wait()
	s.opts.Client.CloseIdleConnections()
	s.mu.Lock()
	s.active = false
	s.mu.Unlock()
	return nil
}

// start launches l's goroutine, again if an earlier Run ran it; s.mu must
// be held.
func (s *Scraper) start(l *loop) {
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	s.wg.Go(func() {
		defer close(done)
		l.run(ctx)
	})
}

// Targets returns the status of every target, sorted by URL.
func (s *Scraper) Targets() []TargetStatus {
	s.mu.Lock()
	loops := make([]*loop, 0, len(s.loops))
	for _, l := range s.loops {
		loops = append(loops, l)
	}
	s.mu.Unlock()
	out := make([]TargetStatus, 0, len(loops))
	for _, l := range loops {
		out = append(out, l.status())
	}
	sortStatuses(out)
	return out
}

func (s *Scraper) countHealth(h Health) float64 {
	n := 0
	for _, st := range s.Targets() {
		if st.Health == h {
			n++
		}
	}
	return float64(n)
}

func labelMap(ls labels.Labels) map[string]string {
	m := make(map[string]string, ls.Len())
	ls.Range(func(l labels.Label) { m[l.Name] = l.Value })
	return m
}
