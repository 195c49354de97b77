package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/watch"
)

// ErrInvalidOption marks bad fleet options.
var ErrInvalidOption = errors.New("demo: invalid option")

// ErrClosed is returned by Run on a fleet that was closed or has run
// already: its listeners and governors are released.
var ErrClosed = errors.New("demo: fleet closed")

// Options configure a Fleet. Conn is required.
type Options struct {
	// Conn is the NATS connection the watchers use.
	Conn *nats.Conn
	// Names gives the bucket and subjects; the zero value uses the default
	// prefix.
	Names watch.Names
	// Services default to DefaultServices.
	Services []Service
	// Instances per service; default 2.
	Instances int
	// Period of the incident cycle; default 90s. Each incident lasts a
	// third of it.
	Period time.Duration
	// Heartbeat of the watchers; default 2s.
	Heartbeat time.Duration
	// ErrorLatency: requests that would take longer fail with HTTP 500 after
	// this long; default 400ms, negative for never.
	ErrorLatency time.Duration
	// Traffic turns the load generator on; DefaultOptions sets it.
	Traffic bool
	// Clock times the incident cycle; default clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
}

// DefaultOptions returns the defaults with traffic on.
func DefaultOptions() Options {
	return Options{Instances: 2, Period: 90 * time.Second, Heartbeat: 2 * time.Second,
		ErrorLatency: 400 * time.Millisecond, Traffic: true}
}

func (o *Options) fill() error {
	d := DefaultOptions()
	if o.Conn == nil {
		return fmt.Errorf("%w: Conn is required", ErrInvalidOption)
	}
	if len(o.Services) == 0 {
		o.Services = DefaultServices()
	}
	seen := map[string]bool{}
	for _, s := range o.Services {
		if err := s.Validate(); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: service %s listed twice", ErrInvalidOption, s.Name)
		}
		seen[s.Name] = true
	}
	if o.Instances < 0 || o.Period < 0 || o.Heartbeat < 0 {
		return fmt.Errorf("%w: Instances, Period and Heartbeat must not be negative", ErrInvalidOption)
	}
	if o.Instances == 0 {
		o.Instances = d.Instances
	}
	if o.Period == 0 {
		o.Period = d.Period
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = d.Heartbeat
	}
	if o.ErrorLatency == 0 {
		o.ErrorLatency = d.ErrorLatency
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Endpoint is one instance's address, for scraping.
type Endpoint struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
	// URL is the base URL; the metrics are at URL + "/metrics".
	URL string `json:"url"`
}

// Fleet is the running demo services. New binds their listeners, Run serves
// them, and Close (or the end of Run) releases everything.
type Fleet struct {
	o         Options
	instances []*instance
	// start is when Run began (o.Clock), nil before: the incident cycle
	// counts from it.
	start atomic.Pointer[time.Time]

	// mu guards the fields below.
	mu sync.Mutex
	// used: Run began or Close was called; what New bound is no longer
	// released by Close itself.
	used bool
	// stop ends a Run in progress; running is done when it has returned.
	stop    context.CancelFunc
	running sync.WaitGroup
}

// New builds the instances and binds their listeners; Run starts them.
func New(o Options) (*Fleet, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	f := &Fleet{o: o}
	for i := range o.Services {
		svc := &o.Services[i]
		for n := 1; n <= o.Instances; n++ {
			in, err := newInstance(f, svc, fmt.Sprintf("%s-%d", svc.Name, n), o.Instances)
			if err != nil {
				f.closeUnstarted()
				return nil, err
			}
			f.instances = append(f.instances, in)
		}
	}
	return f, nil
}

func (f *Fleet) closeUnstarted() {
	for _, in := range f.instances {
		in.ln.Close()
		in.g.Close()
	}
}

// Endpoints lists every instance.
func (f *Fleet) Endpoints() []Endpoint {
	out := make([]Endpoint, 0, len(f.instances))
	for _, in := range f.instances {
		out = append(out, Endpoint{Service: in.svc.Name, Instance: in.id, URL: in.url()})
	}
	return out
}

// Running returns the version each instance runs, by instance id.
func (f *Fleet) Running() map[string]int64 {
	out := make(map[string]int64, len(f.instances))
	for _, in := range f.instances {
		out[in.id] = in.g.Version()
	}
	return out
}

// Close stops the fleet and releases its listeners, servers, watchers and
// governors, and returns once every goroutine of the fleet has: it ends a
// Run in progress and waits for it, or releases what New bound when Run
// never began. It may be called more than once, and concurrently with Run.
func (f *Fleet) Close() error {
	f.mu.Lock()
	used, stop := f.used, f.stop
	f.used = true
	f.mu.Unlock()
	switch {
	case !used:
		f.closeUnstarted()
	case stop != nil:
		stop()
	}
	f.running.Wait()
	return nil
}

// Run serves, watches and (with Traffic) sends load until ctx ends or Close
// is called, then stops everything and returns nil. A fleet runs once: Run
// after Close, or after an earlier Run, returns ErrClosed.
func (f *Fleet) Run(ctx context.Context) error {
	f.mu.Lock()
	if f.used {
		f.mu.Unlock()
		return ErrClosed
	}
	f.used = true
	ctx, stop := context.WithCancel(ctx)
	f.stop = stop
	f.running.Add(1)
	f.mu.Unlock()
	defer f.running.Done()
	defer stop()
	start := f.o.Clock.Now()
	f.start.Store(&start)
	var wg sync.WaitGroup
	for _, in := range f.instances {
		wg.Go(func() { in.run(ctx) })
	}
	if f.o.Traffic {
		for i := range f.o.Services {
			svc := &f.o.Services[i]
			var mine []*instance
			for _, in := range f.instances {
				if in.svc == svc {
					mine = append(mine, in)
				}
			}
			g := newGenerator(svc, mine, f)
			wg.Go(func() { g.run(ctx) })
		}
	}
	wg.Wait()
	return nil
}

// Phase returns the incident state of a service now: its name and whether
// it is active (never before Run). A slow downstream or a capacity drop
// holds for whatever load the instances get; a spike only exists in the
// fleet's own traffic, so without Traffic it is never active.
func (f *Fleet) Phase(service string) (Incident, bool) {
	for i := range f.o.Services {
		if s := &f.o.Services[i]; s.Name == service {
			r, w, c := f.phase(s)
			return s.Incident, (r != 1 && f.o.Traffic) || w != 1 || c != 1
		}
	}
	return 0, false
}

// phase returns the incident multipliers of svc now (Service.phase); all 1
// before Run.
func (f *Fleet) phase(svc *Service) (rate, work, capDiv float64) {
	start := f.start.Load()
	if start == nil {
		return 1, 1, 1
	}
	return svc.phase(f.o.Clock.Now().Sub(*start), f.o.Period)
}

// Services returns the fleet's services.
func (f *Fleet) Services() []Service { return append([]Service(nil), f.o.Services...) }
