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
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite"

	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/promapi"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/demo"
	"governor.dev/governor/ui/engineclient"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/signalsource"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	addr, sqlitePath, postgresURL, admin, engine, prometheus string
	demo                                                     bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&c.sqlitePath, "sqlite", "governor.db", "SQLite database file (ignored with -postgres)")
	fs.StringVar(&c.postgresURL, "postgres", "", "PostgreSQL URL of the rules database")
	fs.StringVar(&c.admin, "admin", "admin", "name of the first admin, created with a one-time password if there are no users")
	fs.StringVar(&c.engine, "engine", "", "base URL of the decision engine's API (live load scores and the delivery ledger), e.g. http://127.0.0.1:9090")
	fs.StringVar(&c.prometheus, "prometheus", "", "base URL of the Prometheus-compatible API the engine reads: service page charts and the overview's golden signals")
	fs.BoolVar(&c.demo, "demo", false, "show an in-memory demo fleet with alerts and a scripted incident")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, c, stdout, log); err != nil {
		log.Error("web: stopped", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, c config, stdout io.Writer, log *slog.Logger) error {
	store, db, dialect, err := open(ctx, c, log)
	if err != nil {
		return err
	}
	defer store.Close()
	defer db.Close()
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: dialect, Auditor: store, Logger: log})
	if err != nil {
		return err
	}
	pw, err := am.EnsureAdmin(ctx, c.admin)
	if err != nil {
		return err
	}
	if pw != "" {
		fmt.Fprintf(stdout, "Created the first admin %q with the one-time password: %s\nLog in and choose a new password; it is not shown again.\n", c.admin, pw)
	}
	// The alerting configuration admins save here; the engine applies it.
	routing, err := configstore.New(ctx, db, dialect, configstore.Options{Logger: log})
	if err != nil {
		return err
	}
	o := ui.Options{Rules: store, Auth: am, Logger: log, Registerer: prometheus.NewRegistry(), AlertRouting: routing}
	if c.engine != "" {
		ec, err := engineclient.New(engineclient.Options{BaseURL: c.engine})
		if err != nil {
			return err
		}
		o.Fleet = ec
	}
	if c.prometheus != "" {
		src, err := promapi.New(promapi.Options{Address: c.prometheus, Logger: log})
		if err != nil {
			return err
		}
		charts, err := signalsource.New(signalsource.Options{Source: src})
		if err != nil {
			return err
		}
		o.Charts = charts
		if o.Fleet != nil {
			rd, err := signals.NewReader(src, signals.DefaultReaderOptions())
			if err != nil {
				return err
			}
			if o.Fleet, err = signalsource.Enrich(o.Fleet, rd, nil); err != nil {
				return err
			}
		}
	}
	if c.demo {
		fleet, alerts := &model.StaticFleet{}, model.NewMemoryAlerts(clock.Real{})
		do := demo.Options{Rules: store, Fleet: fleet, Alerts: alerts}
		if err := demo.Seed(ctx, do); err != nil {
			return err
		}
		go func() { _ = demo.Run(ctx, do) }()
		o.Fleet, o.Alerts = fleet, alerts
	}
	h, err := ui.New(o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Governor web UI on http://%s/\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
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
