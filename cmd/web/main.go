// Command web serves Governor's web UI and JSON API as its own process (in
// production, several behind a load balancer: all state is in the rules
// database). On first start it creates an admin with a one-time password and
// prints it; nothing ships with a default password.
//
//	web -addr 127.0.0.1:8080 -sqlite governor.db
//	web -addr :8080 -postgres postgres://...
//	web -engine http://127.0.0.1:9090   # live scores and ledger from the engine's API
//	web -engine http://127.0.0.1:9090 -prometheus http://127.0.0.1:9091
//	web -demo    # in-memory demo fleet, alerts and a scripted incident
//
// The command line is checked before anything is opened: a bad value is
// refused (exit 2) naming its flag. The listener is bound before the
// database is touched, so a start that fails on its address creates no
// admin. GET /healthz answers while the process runs; GET /readyz answers
// 503 while the database does not. SIGINT or SIGTERM stops it: live
// overview streams end, other requests get up to 10s to finish; a second
// signal exits at once.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"

	"governor.dev/governor/cmd/internal/shutdown"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/promapi"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/engineclient"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/signalsource"
)

// main stops cleanly at the first SIGINT or SIGTERM; a second one exits at
// once (package shutdown).
func main() {
	ctx, stop := shutdown.Notify(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type config struct {
	addr, sqlitePath, postgresURL, admin, engine, prometheus string
	demo                                                     bool
	trustedProxies                                           []netip.Prefix
	engineMaxAge                                             time.Duration
}

// run returns the exit code: 0 after a clean stop (also one that a signal
// asked for while the start was under way), 1 when the start or the stop
// failed, 2 for a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	src, err := newSources(c, log)
	if err != nil {
		fmt.Fprintf(stderr, "web: bad command line: %v\n", err)
		return 2
	}
	if err := serve(ctx, c, src, stdout, log); err != nil {
		log.Error("web: stopped", "err", err)
		return 1
	}
	return 0
}

// parse reads the flags and refuses bad values, each error naming its flag.
// Flag syntax errors are printed by the flag set; the others here.
func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address (host:port)")
	fs.StringVar(&c.sqlitePath, "sqlite", "governor.db", "SQLite database file (ignored with -postgres)")
	fs.StringVar(&c.postgresURL, "postgres", "", "postgres:// URL of the rules database")
	fs.StringVar(&c.admin, "admin", "admin", "name of the first admin, created with a one-time password if there are no users")
	fs.StringVar(&c.engine, "engine", "", "base URL of the decision engine's API (live load scores and the delivery ledger), e.g. http://127.0.0.1:9090")
	fs.StringVar(&c.prometheus, "prometheus", "", "base URL of the Prometheus-compatible API the engine reads: service page charts and the overview's golden signals")
	fs.BoolVar(&c.demo, "demo", false, "show an in-memory demo fleet with alerts and a scripted incident")
	fs.DurationVar(&c.engineMaxAge, "engine-max-age", engineclient.DefaultMaxAge, "with -engine: an engine whose last evaluation is older is shown as unavailable, not its old scores as live (at least a few of the engine's intervals)")
	var proxies string
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated networks (CIDR) of the load balancers in front: a login from one counts against the X-Forwarded-For client's throttle, not the balancer's")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var errs []error
	for p := range strings.SplitSeq(proxies, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("-trusted-proxies: %q is not a network such as 10.0.0.0/8: %w", p, err))
			continue
		}
		c.trustedProxies = append(c.trustedProxies, pfx.Masked())
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q (flags go before them)", fs.Args()))
	}
	if c.engineMaxAge <= 0 {
		errs = append(errs, fmt.Errorf("-engine-max-age: must be positive, got %s", c.engineMaxAge))
	}
	if _, _, err := net.SplitHostPort(c.addr); err != nil {
		errs = append(errs, fmt.Errorf("-addr: %q is not host:port: %w", c.addr, err))
	}
	if err := auth.ValidateUserName(c.admin); err != nil {
		errs = append(errs, fmt.Errorf("-admin: %q: %w", c.admin, err))
	}
	switch {
	case c.postgresURL != "":
		if !strings.HasPrefix(c.postgresURL, "postgres://") && !strings.HasPrefix(c.postgresURL, "postgresql://") {
			errs = append(errs, errors.New("-postgres: must be a postgres:// URL"))
		}
	case c.sqlitePath == "":
		errs = append(errs, errors.New("-sqlite: a file is required without -postgres"))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "web: bad command line:\n%v\n", err)
		return c, err
	}
	return c, nil
}

// sources are the optional live data the flags name, built before anything
// is opened so that a bad URL is refused at once.
type sources struct {
	fleet  model.Fleet
	charts model.Charts
}

func newSources(c config, log *slog.Logger) (sources, error) {
	var s sources
	if c.engine != "" {
		ec, err := engineclient.New(engineclient.Options{BaseURL: c.engine, MaxAge: c.engineMaxAge})
		if err != nil {
			return s, fmt.Errorf("-engine: %w", err)
		}
		s.fleet = ec
	}
	if c.prometheus != "" {
		src, err := promapi.New(promapi.Options{Address: c.prometheus, Logger: log})
		if err != nil {
			return s, fmt.Errorf("-prometheus: %w", err)
		}
		if s.charts, err = signalsource.New(signalsource.Options{Source: src}); err != nil {
			return s, fmt.Errorf("-prometheus: %w", err)
		}
		if s.fleet != nil {
			rd, err := signals.NewReader(src, signals.DefaultReaderOptions())
			if err != nil {
				return s, fmt.Errorf("-prometheus: %w", err)
			}
			if s.fleet, err = signalsource.Enrich(s.fleet, rd, nil); err != nil {
				return s, fmt.Errorf("-prometheus: %w", err)
			}
		}
	}
	return s, nil
}

// open opens the rules store and a database/sql handle on the same database
// for the UI's accounts.
func open(ctx context.Context, c config, log *slog.Logger) (versioning.Store, *sql.DB, migrations.Dialect, error) {
	if c.postgresURL != "" {
		st, err := postgres.Open(ctx, postgres.Options{URL: c.postgresURL, Logger: log})
		if err != nil {
			return nil, nil, "", err
		}
		db, err := sql.Open("pgx", c.postgresURL)
		if err != nil {
			_ = st.Close()
			return nil, nil, "", err
		}
		return st, db, migrations.Postgres, nil
	}
	st, err := sqlite.Open(ctx, sqlite.Options{Path: c.sqlitePath, Logger: log})
	if err != nil {
		return nil, nil, "", err
	}
	db, err := sqlitedb.Open(c.sqlitePath, sqlitedb.Options{})
	if err != nil {
		_ = st.Close()
		return nil, nil, "", err
	}
	return st, db, migrations.SQLite, nil
}
