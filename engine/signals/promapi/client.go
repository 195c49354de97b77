package promapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/common/model"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
)

// Options configures a Client. Zero fields take the defaults of
// DefaultOptions; Address is required.
type Options struct {
	// Address is the base URL of the query API, e.g. http://prometheus:9090
	// (or a Thanos Query / Mimir / VictoriaMetrics prefix).
	Address string
	// Timeout bounds one attempt. Default 30s.
	Timeout time.Duration
	// Retries is the number of attempts after the first. Default 2;
	// negative means none.
	Retries int
	// Backoff is the wait before the first retry; it doubles per retry up to
	// MaxBackoff, and each wait is jittered to between half and all of it.
	// Defaults 250ms and 5s.
	Backoff, MaxBackoff time.Duration
	// MaxResponseBytes bounds the size of an answer, counted after gzip
	// decoding, so that a query matching far more series than expected
	// fails with ErrResponseTooLarge instead of exhausting memory. Default
	// DefaultMaxResponseBytes; negative means no limit.
	MaxResponseBytes int64
	// RoundTripper makes the requests. Default api.DefaultRoundTripper.
	RoundTripper http.RoundTripper
	// Clock times the back-off. Default clock.Real.
	Clock clock.Clock
	// Logger receives retried failures at debug level. Default: discard.
	Logger *slog.Logger
	// Registerer receives the client's metrics. Default: not registered.
	Registerer prometheus.Registerer
}

// DefaultMaxResponseBytes is the default Options.MaxResponseBytes.
const DefaultMaxResponseBytes = 64 << 20

// DefaultOptions returns the defaults (without an address).
func DefaultOptions() Options {
	return Options{Timeout: 30 * time.Second, Retries: 2, Backoff: 250 * time.Millisecond, MaxBackoff: 5 * time.Second,
		MaxResponseBytes: DefaultMaxResponseBytes}
}

// Client queries a Prometheus-compatible HTTP API. It is a signals.Source
// and safe for concurrent use.
type Client struct {
	api  v1.API
	opts Options
	// serverTimeout is opts.Timeout as the query's timeout parameter (see
	// serverTimeout).
	serverTimeout time.Duration
	attempts      *prometheus.CounterVec
	duration      prometheus.Histogram
	// wait sleeps for d or until ctx ends; tests replace it.
	wait func(ctx context.Context, d time.Duration) error
	// jitter returns a number in [0, 1); tests replace it.
	jitter func() float64
}

var _ signals.PromQLSource = (*Client)(nil)

// New validates the options and returns a client.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: address: want an http(s) URL with a host, got %q", signals.ErrInvalidOption, opts.Address)
	}
	d := DefaultOptions()
	if opts.Timeout < 0 || opts.Backoff < 0 || opts.MaxBackoff < 0 {
		return nil, fmt.Errorf("%w: timeout, backoff and max_backoff must not be negative", signals.ErrInvalidOption)
	}
	if opts.Timeout == 0 {
		opts.Timeout = d.Timeout
	}
	switch {
	case opts.Retries == 0:
		opts.Retries = d.Retries
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.Backoff == 0 {
		opts.Backoff = d.Backoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = max(d.MaxBackoff, opts.Backoff)
	}
	if opts.MaxBackoff < opts.Backoff {
		return nil, fmt.Errorf("%w: max_backoff %s is below backoff %s", signals.ErrInvalidOption, opts.MaxBackoff, opts.Backoff)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxResponseBytes == 0 {
		opts.MaxResponseBytes = d.MaxResponseBytes
	}
	rt := opts.RoundTripper
	if rt == nil {
		rt = api.DefaultRoundTripper
	}
	ac, err := api.NewClient(api.Config{Address: opts.Address, RoundTripper: &transport{rt: rt, limit: opts.MaxResponseBytes, clk: opts.Clock}})
	if err != nil {
		return nil, fmt.Errorf("%w: address: %v", signals.ErrInvalidOption, err)
	}
	f := promauto.With(opts.Registerer)
	c := &Client{
		api:           v1.NewAPI(ac),
		opts:          opts,
		serverTimeout: serverTimeout(opts.Timeout),
		attempts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_signals_promapi_attempts_total",
			Help: "Query attempts against the Prometheus API by result (success, retried, failed).",
		}, []string{"result"}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "governor_signals_promapi_attempt_duration_seconds",
			Help:    "Duration of query attempts against the Prometheus API.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 8),
		}),
		jitter: rand.Float64,
	}
	for _, r := range []string{"success", "retried", "failed"} {
		c.attempts.WithLabelValues(r)
	}
	c.wait = c.clockWait
	return c, nil
}

func (c *Client) clockWait(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, c.opts.Clock, d)
}

// serverTimeout is the attempt timeout d as the query API's timeout
// parameter. The client sends it as Go writes durations, and Prometheus
// (like Thanos and Mimir) refuses a fraction there ("1.5s": bad_data) but
// takes whole units ("1m30s", "500ms"), so d is cut to whole seconds, or to
// whole milliseconds below a second. The server then gives up no later than
// the attempt does.
func serverTimeout(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Truncate(time.Second)
	}
	return d.Truncate(time.Millisecond)
}

// Query evaluates an instant query at time at.
func (c *Client) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	return c.do(ctx, func(ctx context.Context) (model.Value, v1.Warnings, v1.Infos, error) {
		return c.api.Query(ctx, q, at, v1.WithTimeout(c.serverTimeout))
	})
}

// QueryRange evaluates a range query.
func (c *Client) QueryRange(ctx context.Context, q string, r signals.Range) (*signals.Result, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return c.do(ctx, func(ctx context.Context) (model.Value, v1.Warnings, v1.Infos, error) {
		return c.api.QueryRange(ctx, q, v1.Range{Start: r.Start, End: r.End, Step: r.Step}, v1.WithTimeout(c.serverTimeout))
	})
}

type call func(ctx context.Context) (model.Value, v1.Warnings, v1.Infos, error)

func (c *Client) do(ctx context.Context, f call) (*signals.Result, error) {
	backoff := c.opts.Backoff
	for attempt := 0; ; attempt++ {
		var info attemptInfo
		actx, cancel := context.WithTimeout(withAttempt(ctx, &info), c.opts.Timeout)
		start := time.Now()
		v, warns, infos, err := f(actx)
		c.duration.Observe(time.Since(start).Seconds())
		cancel()
		if err == nil {
			c.attempts.WithLabelValues("success").Inc()
			return convert(v, warns, infos)
		}
		if ctx.Err() != nil {
			c.attempts.WithLabelValues("failed").Inc()
			return nil, fmt.Errorf("%w: %w", signals.ErrUnavailable, ctx.Err())
		}
		msg := describe(err)
		if errors.Is(err, ErrResponseTooLarge) {
			c.attempts.WithLabelValues("failed").Inc()
			return nil, fmt.Errorf("%w: %w", signals.ErrQuery, err)
		}
		if !retriable(err) {
			c.attempts.WithLabelValues("failed").Inc()
			return nil, fmt.Errorf("%w: %s", signals.ErrQuery, msg)
		}
		if attempt >= c.opts.Retries {
			c.attempts.WithLabelValues("failed").Inc()
			return nil, fmt.Errorf("%w: %d attempts: %s", signals.ErrUnavailable, attempt+1, msg)
		}
		d := backoff/2 + time.Duration(c.jitter()*float64(backoff/2))
		if ra := info.RetryAfter(); ra > c.opts.MaxBackoff {
			// The server asks for a longer pause than a query may wait:
			// the next query (the next engine cycle) asks again.
			c.attempts.WithLabelValues("failed").Inc()
			return nil, fmt.Errorf("%w: %d attempts: %s (server asks to retry after %s, more than max_backoff %s)",
				signals.ErrUnavailable, attempt+1, msg, ra, c.opts.MaxBackoff)
		} else if ra > d {
			d = ra
		}
		c.attempts.WithLabelValues("retried").Inc()
		c.opts.Logger.Debug("prometheus query failed, retrying", "attempt", attempt+1, "wait", d, "err", msg)
		if werr := c.wait(ctx, d); werr != nil {
			return nil, fmt.Errorf("%w: %w (after %v)", signals.ErrUnavailable, werr, err)
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
	}
}

// maxDetail bounds how much of an error body an error repeats.
const maxDetail = 256

// describe is err's text with, for an answer that is not the API's error
// JSON (a 5xx from Prometheus or from a proxy before Thanos or Mimir), the
// start of its body on one line: "server_error: server error: 503: no
// StoreAPIs matched". The client's own text says only the status.
func describe(err error) string {
	var ae *v1.Error
	if !errors.As(err, &ae) || ae.Detail == "" {
		return err.Error()
	}
	d := strings.Join(strings.Fields(ae.Detail), " ")
	if len(d) > maxDetail {
		d = strings.ToValidUTF8(d[:maxDetail], "") + "..."
	}
	if d == "" {
		return err.Error()
	}
	return err.Error() + ": " + d
}

// retriable reports failures that another attempt may not repeat.
func retriable(err error) bool {
	var ae *v1.Error
	if !errors.As(err, &ae) {
		return true // transport: refused, reset, attempt timeout
	}
	switch ae.Type {
	case v1.ErrServer, v1.ErrTimeout:
		return true
	case v1.ErrClient:
		return ae.Msg == fmt.Sprintf("client error: %d", http.StatusTooManyRequests)
	}
	return false
}

// EvaluatesPromQL marks the client as a signals.PromQLSource: the server
// evaluates any PromQL.
func (c *Client) EvaluatesPromQL() {}
