package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/demo"
	"governor.dev/governor/ui/model"
)

// Shutdown bounds: how long requests in progress get to finish, and how long
// a readiness probe waits for the database.
const (
	drainTimeout = 10 * time.Second
	readyTimeout = 2 * time.Second
)

// serve runs the UI until ctx ends. The listener is bound first: a start
// that fails on its address must not create the first admin, whose one-time
// password is printed only once. A start that ctx ends (a signal while the
// database is being opened) is a clean stop, not a failure.
func serve(ctx context.Context, c config, src sources, stdout io.Writer, log *slog.Logger) (err error) {
	serving := false
	defer func() {
		if err != nil && !serving && ctx.Err() != nil {
			log.Info("web: stopped before the start completed", "err", err)
			err = nil
		}
	}()
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	defer ln.Close()
	store, db, dialect, err := open(ctx, c, log)
	if err != nil {
		return err
	}
	// The database closes after every user of it: the server and the demo
	// below stop before these run.
	defer store.Close()
	defer db.Close()
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: dialect, Auditor: store, Logger: log, TrustedProxies: c.trustedProxies})
	if err != nil {
		return err
	}
	if err := ensureAdmin(ctx, am, c.admin, stdout); err != nil {
		return err
	}
	// The alerting configuration admins save here; the engine applies it.
	routing, err := configstore.New(ctx, db, dialect, configstore.Options{Logger: log})
	if err != nil {
		return err
	}
	stopping := make(chan struct{})
	o := ui.Options{Rules: store, Auth: am, Logger: log, Registerer: prometheus.NewRegistry(), AlertRouting: routing,
		Fleet: src.fleet, Charts: src.charts, Stopping: stopping}
	// The demo's incident script writes to the store: it ends, and is
	// waited for, before the store closes, on every return.
	var wg sync.WaitGroup
	defer wg.Wait()
	dctx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	if c.demo {
		fleet, alerts := &model.StaticFleet{}, model.NewMemoryAlerts(clock.Real{})
		do := demo.Options{Rules: store, Fleet: fleet, Alerts: alerts}
		if err := demo.Seed(ctx, do); err != nil {
			return err
		}
		wg.Go(func() { _ = demo.Run(dctx, do) })
		o.Fleet, o.Alerts = fleet, alerts
	}
	h, err := ui.New(o)
	if err != nil {
		return err
	}
	ready := readyz(db)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			ready.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	fmt.Fprintf(stdout, "Governor web UI on http://%s/\n", ln.Addr())
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	serving = true
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Event streams never finish by themselves; Shutdown would wait for
	// them until its timeout and report a failed stop.
	close(stopping)
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: requests still running after %s: %w", drainTimeout, err)
	}
	return nil
}

// ensureAdmin makes sure some user holds the admin role
// (auth.Manager.EnsureAdmin) and says on stdout what it did: it created the
// first admin, or, on a database whose users held no admin role (audited
// as auth.ActionAdminRecover), it created the configured admin or gave the
// role to the existing user of that name, who keeps their password. A
// one-time password is printed once. Nothing is printed when an admin
// existed, or when another replica starting at the same time made one.
func ensureAdmin(ctx context.Context, am *auth.Manager, name string, stdout io.Writer) error {
	r, err := am.EnsureAdminReport(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, r.Banner())
	return nil
}

// readyz answers 200 while the database answers, 503 with {"error"} when it
// does not: a load balancer sends no traffic to a replica that cannot serve
// it. /healthz (in package ui) only says the process runs.
func readyz(db *sql.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		w.Header().Set("Cache-Control", "no-store")
		if err := db.PingContext(ctx); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "database: " + err.Error()})
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
}
