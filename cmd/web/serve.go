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
	"strings"
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
// password is printed only once.
func serve(ctx context.Context, c config, src sources, stdout io.Writer, log *slog.Logger) error {
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
	o := ui.Options{Rules: store, Auth: am, Logger: log, Registerer: prometheus.NewRegistry(), AlertRouting: routing,
		Fleet: src.fleet, Charts: src.charts}
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
	var st streams
	ready, pages := readyz(db), st.wrap(h)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			ready.ServeHTTP(w, r)
			return
		}
		pages.ServeHTTP(w, r)
	})
	fmt.Fprintf(stdout, "Governor web UI on http://%s/\n", ln.Addr())
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Event streams never finish by themselves; Shutdown would wait for
	// them until its timeout and report a failed stop.
	st.end()
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: requests still running after %s: %w", drainTimeout, err)
	}
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

// streams ends the requests answered as Server-Sent Events (Content-Type
// text/event-stream) when the server stops: they run until their context
// ends, which Shutdown alone never does. Other requests are left to finish.
type streams struct {
	mu    sync.Mutex
	live  map[*streamWriter]struct{}
	ended bool
}

func (s *streams) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		sw := &streamWriter{ResponseWriter: w, s: s, cancel: cancel}
		defer s.forget(sw)
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// add registers a stream, or ends it at once if the server is stopping.
func (s *streams) add(w *streamWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		w.cancel()
		return
	}
	if s.live == nil {
		s.live = map[*streamWriter]struct{}{}
	}
	s.live[w] = struct{}{}
}

func (s *streams) forget(w *streamWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, w)
}

// end ends every stream, and those that start later.
func (s *streams) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	for w := range s.live {
		w.cancel()
	}
}

// streamWriter notices the response's content type when its header is
// written. Unwrap keeps http.ResponseController (flush, deadlines) working.
type streamWriter struct {
	http.ResponseWriter
	s      *streams
	cancel context.CancelFunc
	noted  bool
}

// note looks once at the header being sent.
func (w *streamWriter) note() {
	if w.noted {
		return
	}
	w.noted = true
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		w.s.add(w)
	}
}

func (w *streamWriter) WriteHeader(code int) {
	if code >= 200 {
		w.note()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *streamWriter) Write(b []byte) (int, error) {
	w.note()
	return w.ResponseWriter.Write(b)
}

func (w *streamWriter) Flush() {
	w.note()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var _ http.Flusher = (*streamWriter)(nil)
