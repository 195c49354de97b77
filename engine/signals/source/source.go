package source

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/signals/promapi"
	"governor.dev/governor/sdk/clock"
)

// Deps are the injected dependencies; zero fields take defaults (discard
// logger, no metrics, real clock).
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Clock      clock.Clock
	// OnScrape is passed to the embedded scraper.
	OnScrape func(embedded.TargetStatus)
}

// Signals is a running signal source with its reader.
type Signals struct {
	// Source answers PromQL (charts use it for range queries).
	Source signals.Source
	// Reader reads the signals.
	Reader *signals.Reader
	// Store is the embedded store, nil when reading from Prometheus. Its
	// SetTargets, Targets and StatusHandler serve the target status API.
	Store *embedded.Store
}

// Open builds the source the configuration selects. Run it, and Close it
// after Run has returned.
func Open(cfg Config, deps Deps) (*Signals, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Signals{}
	if p := cfg.Prometheus; p != nil {
		retries := 0 // promapi's default
		if p.Retries != nil {
			retries = *p.Retries
			if retries == 0 {
				retries = -1 // configured zero means none
			}
		}
		c, err := promapi.New(promapi.Options{
			Address:    p.Address,
			Timeout:    time.Duration(p.Timeout),
			Retries:    retries,
			Clock:      deps.Clock,
			Logger:     deps.Logger,
			Registerer: deps.Registerer,
		})
		if err != nil {
			return nil, err
		}
		s.Source = c
	} else {
		st, err := embedded.NewStore(
			embedded.Options{Retention: time.Duration(cfg.Embedded.Retention), Logger: deps.Logger, Registerer: deps.Registerer},
			embedded.ScraperOptions{
				Interval:   time.Duration(cfg.Embedded.Interval),
				Timeout:    time.Duration(cfg.Embedded.Timeout),
				Clock:      deps.Clock,
				Logger:     deps.Logger,
				Registerer: deps.Registerer,
				OnScrape:   deps.OnScrape,
			})
		if err != nil {
			return nil, err
		}
		if err := st.SetTargets(cfg.Embedded.Targets); err != nil {
			return nil, errors.Join(err, st.Close())
		}
		s.Source, s.Store = st, st
	}
	r, err := signals.NewReader(s.Source, signals.ReaderOptions{
		Templates: cfg.Templates,
		Window:    time.Duration(cfg.Window),
		MaxAge:    time.Duration(cfg.MaxAge),
	})
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.Reader = r
	return s, nil
}

// Run scrapes (embedded) or just waits (Prometheus) until ctx is done.
func (s *Signals) Run(ctx context.Context) error {
	if s.Store != nil {
		return s.Store.Run(ctx)
	}
	<-ctx.Done()
	return nil
}

// Close releases the embedded store.
func (s *Signals) Close() error {
	if s.Store != nil {
		return s.Store.Close()
	}
	return nil
}
