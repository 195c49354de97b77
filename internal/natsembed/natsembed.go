// Package natsembed runs a NATS server with JetStream inside the process: the
// zero-setup default for `make run` and for tests. Production points the
// control plane and the SDKs at a real NATS cluster instead.
//
// The server listens on loopback, on a random port unless one is configured,
// and keeps its JetStream data in a temporary directory (removed on Close) or
// in a configured data directory (kept, so a restart finds its streams). A
// server holds an exclusive lock on its data directory from Start to Close:
// a second server (another process started on the same directory) is
// refused rather than left to corrupt the streams.
package natsembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrStart is wrapped by every failure to start the server.
var ErrStart = errors.New("natsembed: start")

// storeLockName is the lock file a server keeps in its store directory.
const storeLockName = "governor-nats.lock"

// Options configure the embedded server. The zero value is usable.
type Options struct {
	// Host to listen on; default 127.0.0.1.
	Host string
	// Port to listen on; 0 picks a free port.
	Port int
	// StoreDir keeps the JetStream data. Empty means a temporary directory
	// that Close removes. One server at a time uses a directory: Start
	// fails while another holds it.
	StoreDir string
	// ServerName names the server; default "governor-embedded".
	ServerName string
	// MaxPayload bounds one message; default 1 MiB (the NATS default).
	MaxPayload int32
	// MaxMemory and MaxStore bound JetStream memory and file storage;
	// defaults 256 MiB and 1 GiB.
	MaxMemory int64
	MaxStore  int64
	// StartTimeout bounds the wait for the server to accept clients;
	// default 10s.
	StartTimeout time.Duration
	// Logger receives the server's log at debug level (notices at info,
	// warnings and errors at their levels). Nil discards it.
	Logger *slog.Logger
}

// DefaultOptions returns the defaults: loopback, a random port, a temporary
// store.
func DefaultOptions() Options {
	return Options{
		Host:         "127.0.0.1",
		ServerName:   "governor-embedded",
		MaxPayload:   1 << 20,
		MaxMemory:    256 << 20,
		MaxStore:     1 << 30,
		StartTimeout: 10 * time.Second,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Host == "" {
		o.Host = d.Host
	}
	if o.ServerName == "" {
		o.ServerName = d.ServerName
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = d.MaxPayload
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = d.MaxMemory
	}
	if o.MaxStore <= 0 {
		o.MaxStore = d.MaxStore
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = d.StartTimeout
	}
	return o
}

// Server is a running embedded NATS server.
type Server struct {
	mu      sync.Mutex
	opts    Options
	tempDir bool
	lock    *os.File // held on StoreDir from Start to Close
	srv     *server.Server
	port    int
}

// Start starts a server and waits until it accepts clients. A server that
// cannot start (its port taken, its store unusable) fails Start at once with
// its reason, wrapped in ErrStart.
func Start(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d is out of range 0..65535", ErrStart, opts.Port)
	}
	s := &Server{opts: opts, port: opts.Port}
	if s.opts.StoreDir == "" {
		dir, err := os.MkdirTemp("", "governor-nats-")
		if err != nil {
			return nil, fmt.Errorf("%w: store directory: %w", ErrStart, err)
		}
		s.opts.StoreDir, s.tempDir = dir, true
	} else if err := os.MkdirAll(s.opts.StoreDir, 0o750); err != nil {
		return nil, fmt.Errorf("%w: store directory: %w", ErrStart, err)
	}
	lock, err := lockStore(s.opts.StoreDir)
	if err == nil {
		s.lock = lock
		err = s.start()
	} else {
		err = fmt.Errorf("%w: store directory: %w", ErrStart, err)
	}
	if err != nil {
		_ = s.release()
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	port := s.port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	so := &server.Options{
		ServerName:         s.opts.ServerName,
		Host:               s.opts.Host,
		Port:               port,
		JetStream:          true,
		StoreDir:           s.opts.StoreDir,
		JetStreamMaxMemory: s.opts.MaxMemory,
		JetStreamMaxStore:  s.opts.MaxStore,
		MaxPayload:         s.opts.MaxPayload,
		NoSigs:             true,
		NoLog:              s.opts.Logger == nil,
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStart, err)
	}
	// The server reports a failure to start (its port taken, its
	// JetStream store unusable) only to its logger, and then never becomes
	// ready: the adapter keeps the first such report so that Start fails at
	// once with it instead of waiting out StartTimeout.
	log := &slogAdapter{l: s.opts.Logger, fatal: make(chan string, 1)}
	srv.SetLoggerV2(log, s.opts.Logger != nil, false, false)
	go srv.Start()
	if err := waitReady(srv, log.fatal, s.opts.StartTimeout); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("%w: %s: %w", ErrStart, net.JoinHostPort(s.opts.Host, fmt.Sprint(s.port)), err)
	}
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		s.port = a.Port
	}
	s.srv = srv
	return nil
}

// URL returns the client URL, e.g. nats://127.0.0.1:41234.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("nats://%s", net.JoinHostPort(s.opts.Host, fmt.Sprint(s.port)))
}

// Port returns the port the server listens on (kept across Restart).
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// StoreDir returns the JetStream data directory.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Running reports whether the server is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv != nil
}

// Stop shuts the server down but keeps its store and port, so Restart brings
// it back with the same streams at the same URL. Clients see a disconnect.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server if it runs and starts it again on the same port
// with the same store.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	return s.start()
}

// Close stops the server, gives up its store directory and removes a
// temporary one.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	return s.release()
}

// release gives up the lock on the store directory and removes a
// temporary one.
func (s *Server) release() error {
	if s.lock != nil {
		_ = s.lock.Close()
		s.lock = nil
	}
	if s.tempDir {
		return os.RemoveAll(s.opts.StoreDir)
	}
	return nil
}

// waitReady waits until srv accepts clients, it reports a fatal error, or
// timeout passes.
func waitReady(srv *server.Server, fatal <-chan string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if srv.ReadyForConnections(25 * time.Millisecond) {
			return nil
		}
		select {
		case msg := <-fatal:
			return errors.New(msg)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready for connections within %s", timeout)
		}
	}
}

// slogAdapter feeds the server's log into a *slog.Logger (nil: discarded)
// and keeps the first fatal report in fatal.
type slogAdapter struct {
	l     *slog.Logger
	fatal chan string
}

func (a *slogAdapter) log(level slog.Level, format string, v []any) {
	if a.l != nil {
		a.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (a *slogAdapter) Noticef(format string, v ...any) { a.log(slog.LevelInfo, format, v) }
func (a *slogAdapter) Warnf(format string, v ...any)   { a.log(slog.LevelWarn, format, v) }
func (a *slogAdapter) Errorf(format string, v ...any)  { a.log(slog.LevelError, format, v) }
func (a *slogAdapter) Debugf(format string, v ...any)  { a.log(slog.LevelDebug, format, v) }
func (a *slogAdapter) Tracef(format string, v ...any)  { a.log(slog.LevelDebug, format, v) }

func (a *slogAdapter) Fatalf(format string, v ...any) {
	a.log(slog.LevelError, format, v)
	select {
	case a.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}
