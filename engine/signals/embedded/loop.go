package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// Scrape failures, wrapped with detail in TargetStatus.LastError.
var (
	errScrapeTimeout = errors.New("embedded: scrape timed out")
	errHTTPStatus    = errors.New("embedded: unexpected HTTP status")
	errBodyLimit     = errors.New("embedded: body exceeds limit")
)

// acceptHeader asks for the classic text format, which is what the SDK's
// promhttp handler serves to Prometheus by default.
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// loop scrapes one target.
type loop struct {
	s      *Scraper
	url    string
	target labels.Labels
	cache  *seriesCache
	buf    bytes.Buffer
	report [3]reportSeries

	// cancel and done are those of the goroutine the last Run started:
	// nil until started.
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	st TargetStatus
}

// reportSeries is one synthetic per-target series.
type reportSeries struct {
	lset labels.Labels
	ref  storage.SeriesRef
}

func newLoop(s *Scraper, url string, target labels.Labels) *loop {
	l := &loop{
		s:      s,
		url:    url,
		target: target,
		cache:  newSeriesCache(target, s.opts.SampleLimit),
		st:     TargetStatus{URL: url, Labels: labelMap(target), Health: HealthUnknown},
	}
	for i, name := range []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"} {
		b := labels.NewBuilder(target)
		b.Set(model.MetricNameLabel, name)
		l.report[i].lset = b.Labels()
	}
	return l
}

func (l *loop) status() TargetStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// run scrapes at once and then every interval (measured start to start)
// until ctx is done.
func (l *loop) run(ctx context.Context) {
	clk := l.s.opts.Clock
	for {
		start := clk.Now()
		st, ok := l.scrape(ctx, start)
		wait := l.s.opts.Interval - clk.Now().Sub(start)
		t := clk.NewTimer(max(wait, 0))
		// The hook runs once the next timer exists, so a test driving a fake
		// clock may advance it as soon as it hears of the scrape.
		if f := l.s.opts.OnScrape; ok && f != nil {
			f(st)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// stop ends the loop; with stale it then marks every series of the target
// stale, as Prometheus does when a target disappears.
func (l *loop) stop(stale bool) {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	if !stale {
		return
	}
	ts := l.s.opts.Clock.Now().UnixMilli()
	app := l.s.app.Appender(context.Background())
	l.cache.staleAll(app, ts)
	for i := range l.report {
		_, _ = app.Append(l.report[i].ref, l.report[i].lset, ts, math.Float64frombits(value.StaleNaN))
	}
	if err := app.Commit(); err != nil {
		l.s.opts.Logger.Warn("staleness markers for removed target not stored", "url", l.url, "err", err)
	}
}

// scrape fetches, parses and stores one exposition, then the report series.
// It returns the new status, or false when ctx ended the scrape.
func (l *loop) scrape(ctx context.Context, start time.Time) (TargetStatus, bool) {
	clk := l.s.opts.Clock
	ctype, err := l.fetch(ctx)
	if ctx.Err() != nil {
		return TargetStatus{}, false // stopping: not the target's fault
	}
	dur := clk.Now().Sub(start)
	ts := start.UnixMilli()
	app := l.s.app.Appender(ctx)
	var res appendResult
	if err == nil {
		res, err = l.cache.append(app, l.buf.Bytes(), ctype, ts)
		if err != nil {
			_ = app.Rollback()
			app = l.s.app.Appender(ctx)
			res = appendResult{}
		}
	}
	if err != nil {
		l.cache.staleAll(app, ts)
	} else {
		l.cache.staleMissing(app, ts)
	}
	up := 1.0
	if err != nil {
		up = 0
	}
	for i, v := range []float64{up, dur.Seconds(), float64(res.added + res.dropped)} {
		ref, aerr := app.Append(l.report[i].ref, l.report[i].lset, ts, v)
		if aerr == nil {
			l.report[i].ref = ref
		}
	}
	if cerr := app.Commit(); cerr != nil && err == nil {
		err = fmt.Errorf("embedded: commit: %w", cerr)
	}
	return l.record(start, dur, res, err), true
}

func (l *loop) record(start time.Time, dur time.Duration, res appendResult, err error) TargetStatus {
	l.mu.Lock()
	prev := l.st.Health
	l.st.LastScrape, l.st.LastDuration = start, dur
	l.st.Samples, l.st.Dropped = res.added, res.dropped
	if err != nil {
		l.st.Health, l.st.LastError = HealthDown, err.Error()
	} else {
		l.st.Health, l.st.LastError = HealthUp, ""
	}
	st := l.st
	l.mu.Unlock()

	m := l.s.metrics
	m.duration.Observe(dur.Seconds())
	m.dropped.Add(float64(res.dropped))
	if err != nil {
		m.failures.Inc()
	} else {
		m.successes.Inc()
	}
	if st.Health != prev {
		l.s.opts.Logger.Info("scrape target health changed", "url", l.url, "from", prev, "to", st.Health, "err", st.LastError)
	}
	return st
}

// fetch GETs the target into l.buf and returns the content type. The
// timeout runs on the injected clock.
func (l *loop) fetch(ctx context.Context) (string, error) {
	o := &l.s.opts
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := o.Clock.NewTimer(o.Timeout)
	defer timer.Stop()
	go func() {
		select {
		case <-timer.C():
			cancel(fmt.Errorf("%w after %s", errScrapeTimeout, o.Timeout))
		case <-sctx.Done():
		}
	}()
	cause := func(err error) error {
		if c := context.Cause(sctx); c != nil && errors.Is(c, errScrapeTimeout) {
			return c
		}
		return err
	}

	req, err := http.NewRequestWithContext(sctx, http.MethodGet, l.url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("User-Agent", "governor-engine")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.FormatFloat(o.Timeout.Seconds(), 'f', -1, 64))
	resp, err := o.Client.Do(req)
	if err != nil {
		return "", cause(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("%w: %s", errHTTPStatus, resp.Status)
	}
	l.buf.Reset()
	n, err := l.buf.ReadFrom(io.LimitReader(resp.Body, o.BodyLimit+1))
	if err != nil {
		return "", cause(err)
	}
	if n > o.BodyLimit {
		return "", fmt.Errorf("%w of %d bytes", errBodyLimit, o.BodyLimit)
	}
	return resp.Header.Get("Content-Type"), nil
}
