package pages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

type overviewData struct {
	At       time.Time
	Overview model.Overview
}

func (p *Pages) buildOverview(ctx context.Context) (model.Overview, error) {
	return model.Build(ctx, model.Sources{Rules: p.o.Rules, Fleet: p.o.Fleet, Alerts: p.o.Alerts})
}

func (p *Pages) overview(w http.ResponseWriter, r *http.Request) {
	ov, err := p.buildOverview(r.Context())
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "overview", "Overview", "overview", overviewData{At: p.o.Clock.Now(), Overview: ov})
}

// overviewEvents streams the overview's rows and summary as Server-Sent
// Events ("rows" and "summary", HTML rendered by the same templates as the
// page) every LiveInterval until the client goes away, its session or
// token ends ("end"), or the server stops (Options.Stopping; no "end", so
// the browser reconnects to the server that replaces it).
func (p *Pages) overviewEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // the headers of the stream; it has no end to wait for
	}
	ctx := r.Context()
	pr := auth.FromContext(ctx)
	// The middleware resolved the token from this header; only its secret
	// resolves it again.
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	for {
		// A stream lives no longer than its session: logout, expiry or a
		// role change ends it. Nor than its API token: revocation, expiry,
		// the deletion of its user, or its user losing every role its
		// scopes name ends it.
		if pr != nil && pr.Session != nil {
			if _, err := p.o.Auth.SessionPrincipal(ctx, pr.Session.ID); errors.Is(err, auth.ErrUnauthenticated) {
				_ = writeEvent(w, "end", "session ended")
				return
			}
		}
		if pr != nil && pr.Token != nil {
			now, err := p.o.Auth.TokenPrincipal(ctx, bearer)
			if errors.Is(err, auth.ErrUnauthenticated) || (err == nil && !now.Has(anyRole...)) {
				_ = writeEvent(w, "end", "token no longer valid")
				return
			}
		}
		if err := p.sendOverview(ctx, w); err != nil {
			if !errors.Is(err, context.Canceled) {
				p.o.Logger.Debug("pages: overview stream ended", "err", err)
			}
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		t := p.o.Clock.NewTimer(p.o.LiveInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-p.o.Stopping:
			t.Stop()
			return
		case <-t.C():
		}
	}
}

func (p *Pages) sendOverview(ctx context.Context, w http.ResponseWriter) error {
	ov, err := p.buildOverview(ctx)
	if err != nil {
		return err
	}
	var rows, summary bytes.Buffer
	t := p.tmpl["overview"]
	if err := t.ExecuteTemplate(&rows, "rows", ov); err != nil {
		return err
	}
	if err := t.ExecuteTemplate(&summary, "summary", ov); err != nil {
		return err
	}
	if err := writeEvent(w, "summary", summary.String()); err != nil {
		return err
	}
	return writeEvent(w, "rows", rows.String())
}

// writeEvent writes one SSE event; each line of data gets its own "data:".
// A line ends at CR, LF or CRLF, as the browser reads the stream: a CR
// inside a line (an error text quoted in a banner) would end it there.
func writeEvent(w http.ResponseWriter, event, data string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "event: %s\n", event)
	data = strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := w.Write([]byte(b.String()))
	return err
}

// Ranges a service page offers.
var Ranges = []string{"15m", "1h", "6h", "24h", "7d"}

type serviceData struct {
	Service    string
	Status     model.ServiceStatus
	Active     *versioning.Version
	ScoreChart any
	Instances  []model.Instance
	Charts     []renderedChart
	// ClassCharts are admitted and shed traffic by class and the
	// breakers' states (model.ServiceCharts).
	ClassCharts []renderedChart
	HasLedger   bool
	Range       string
	Ranges      []string
	// Levels are the alert levels in force (model.Details), one row per
	// signal.
	Levels []levelRow
}

func stateRank(s string) int {
	switch s {
	case "NACKED":
		return 0
	case "STALE":
		return 1
	case "GONE":
		return 2
	case "PENDING":
		return 3
	case "UNPUBLISHED":
		return 4
	}
	return 5
}

type renderedChart struct {
	Title, Unit string
	SVG         template.HTML
	// Note says what a reference line drawn on the chart is.
	Note string
}

func parseRange(s string) (string, time.Duration) {
	switch s {
	case "15m":
		return s, 15 * time.Minute
	case "6h":
		return s, 6 * time.Hour
	case "24h":
		return s, 24 * time.Hour
	case "7d":
		return s, 7 * 24 * time.Hour
	}
	return "1h", time.Hour
}

func (p *Pages) service(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	rng, span := parseRange(r.URL.Query().Get("range"))
	d := serviceData{Service: svc, Status: model.ServiceStatus{Name: svc}, Range: rng, Ranges: Ranges}
	var banners []Banner
	if p.o.Fleet == nil {
		banners = append(banners, Banner{"warn", "The metrics source is not configured: no live data."})
	} else {
		// A source may answer what it could read with the error of what
		// it could not (the delivery ledger down): show both.
		sts, err := p.o.Fleet.Services(r.Context())
		if err != nil {
			msg := "The metrics source is unavailable; live data is missing."
			if len(sts) > 0 {
				msg = "Part of the live data could not be read: " + model.Brief(err)
			}
			banners = append(banners, Banner{"warn", msg})
			p.o.Logger.Warn("pages: fleet", "err", err)
		}
		for _, s := range sts {
			if s.Name == svc {
				d.Status = s
			}
		}
	}
	pts, scoreWhy := d.Status.Trend, "the engine has no load score for "+svc+" yet"
	var scoreFailed, scorePartial string
	if h, ok := p.o.Fleet.(model.History); ok {
		if hp, err := h.LoadScoreHistory(r.Context(), svc, span); err == nil {
			pts = hp
		} else {
			banners = append(banners, Banner{"warn", "Load score history is unavailable."})
		}
	} else if w, ok := p.o.Charts.(model.Window); ok {
		// The engine's load score gauge, where the metrics source scrapes
		// the engine: the whole range instead of the recent trend.
		end := p.o.Clock.Now()
		// A failed or partial read is said on the chart, over the recent
		// trend it falls back to.
		cs, err := w.Window(r.Context(), svc, end.Add(-span), end, model.SignalLoadScore)
		switch {
		case len(cs) == 1:
			scoreFailed, scorePartial = cs[0].Failed, cs[0].Partial
			if len(cs[0].Points) > 0 {
				pts = cs[0].Points
			}
		case err != nil:
			scoreFailed = "the metrics source did not answer"
			p.o.Logger.Warn("pages: load score window", "service", svc, "err", err)
		}
	}
	if in, ok := p.o.Fleet.(model.Instances); ok {
		d.HasLedger = true
		if d.Instances, err = in.Instances(r.Context(), svc); err != nil {
			banners = append(banners, Banner{"warn", "The delivery ledger is unavailable."})
		}
		// Instances that need a look first.
		slices.SortStableFunc(d.Instances, func(a, b model.Instance) int { return stateRank(a.State) - stateRank(b.State) })
	}
	detail, detailBanners := p.serviceDetail(r, svc)
	banners = append(banners, detailBanners...)
	d.Levels = levelRows(detail.Levels)
	if p.o.Charts != nil {
		charts, err := p.o.Charts.Charts(r.Context(), svc, span)
		if err != nil {
			banners = append(banners, Banner{"warn", "The metrics source is unavailable: signal charts are missing."})
			p.o.Logger.Warn("pages: charts", "service", svc, "err", err)
		}
		for _, c := range charts {
			o := ChartOptions{Points: c.Points, Unit: c.Unit, Label: c.Title + " of " + svc, Min: c.Min, Max: c.Max, NoData: c.NoData, Failed: c.Failed, Partial: c.Partial}
			rc := renderedChart{Title: c.Title, Unit: c.Unit}
			if lv := detail.P99; lv != nil && isP99(c) {
				o.Target, rc.Note = p99Target(*lv, c.Unit)
			}
			rc.SVG = Chart(o)
			d.Charts = append(d.Charts, rc)
		}
	}
	if sc, ok := p.o.Charts.(model.ServiceCharts); ok {
		charts, err := sc.ServiceCharts(r.Context(), svc, span)
		if err != nil {
			banners = append(banners, Banner{"warn", "The metrics source is unavailable: traffic by class and breaker charts are missing."})
			p.o.Logger.Warn("pages: class charts", "service", svc, "err", err)
		}
		for _, c := range charts {
			d.ClassCharts = append(d.ClassCharts, renderedChart{Title: c.Title, Unit: c.Unit, SVG: SeriesChart(c, c.Title+" of "+svc)})
		}
	}
	d.ScoreChart = Chart(ChartOptions{Points: pts, Label: "load score of " + svc, Min: 0, Max: 1, Act: 0.8, Release: 0.5, NoData: scoreWhy, Failed: scoreFailed, Partial: scorePartial})
	if v, err := p.o.Rules.Active(r.Context(), svc); err == nil {
		d.Active = &v
	} else if !errors.Is(err, versioning.ErrNotFound) {
		banners = append(banners, Banner{"error", "The rules database is unavailable: the active rules cannot be shown."})
	}
	p.render(w, r, http.StatusOK, "service", svc, "overview", d, banners...)
}

// serviceDetail reads what the engine knows of svc beyond its status (the
// p99 alert levels, the versions that cannot be delivered), when the fleet
// reads the engine; the banners say what cannot be delivered, or that the
// detail is unavailable.
func (p *Pages) serviceDetail(r *http.Request, svc string) (model.ServiceDetail, []Banner) {
	det, ok := p.o.Fleet.(model.Details)
	if !ok {
		return model.ServiceDetail{}, nil
	}
	d, err := det.ServiceDetail(r.Context(), svc)
	if err != nil {
		p.o.Logger.Warn("pages: service detail", "service", svc, "err", err)
		return d, []Banner{{"warn", "The engine did not answer: the p99 levels and delivery problems are not shown."}}
	}
	var banners []Banner
	for _, u := range d.Undeliverable {
		banners = append(banners, Banner{"error", u.String() + ". The fleet keeps the version it runs; publish a smaller ruleset or raise the broker's max payload."})
	}
	return d, banners
}

// isP99 tells the p99 latency chart of a service page.
func isP99(c model.Chart) bool {
	return strings.HasPrefix(strings.ToLower(c.Title), "p99") && latencyScale(c.Unit) > 0
}

// latencyScale converts seconds to unit; 0 for a unit that is no time.
func latencyScale(unit string) float64 {
	switch unit {
	case "s":
		return 1
	case "ms":
		return 1e3
	case "µs", "us":
		return 1e6
	}
	return 0
}

// p99Target is the line a p99 chart in unit draws for lv (the warn level,
// above which the engine raises a P2 alert) and the note that names it.
func p99Target(lv model.LatencyLevels, unit string) (float64, string) {
	k := latencyScale(unit)
	from := "set in the engine's configuration"
	if lv.Source == "learned" {
		from = "learned from the service's healthy baseline"
	}
	note := fmt.Sprintf("Dashed line: the p99 target, the warn level %s (%s); above it a P2 alert, above the critical level %s a P1.",
		fmtValue(lv.Warn*k, unit), from, fmtValue(lv.Critical*k, unit))
	return lv.Warn * k, note
}
