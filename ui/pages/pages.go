package pages

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/assets"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

// ErrInvalid: bad options.
var ErrInvalid = errors.New("pages: invalid options")

//go:embed templates
var templateFS embed.FS

// Options configure New.
type Options struct {
	// Rules is the rules store; required.
	Rules versioning.Store
	// Auth holds users and sessions; required.
	Auth *auth.Manager
	// Fleet and Alerts may be nil (not configured: the pages say so).
	Fleet  model.Fleet
	Alerts model.Alerts
	// Rollouts (canary publish, promote, abort) may be nil.
	Rollouts model.Rollouts
	// Charts draws the service page's signal charts; may be nil.
	Charts model.Charts
	// AlertRouting (the saved alerting configuration), its bootstrap
	// document and the engine's configured bands may be nil / empty.
	AlertRouting   model.AlertRouting
	AlertBootstrap string
	ConfigBand     model.ConfigBand
	// AlertService lists the silences by matchers on the alerts page and
	// expires them; nil: the page lists none.
	AlertService *alertsapi.Service

	// AuditChecker verifies the audit chain for the audit page; nil: one of
	// its own over Rules (ui.New shares one between the pages and the API,
	// so that a whole walk done for one serves the other).
	AuditChecker *versioning.AuditChecker

	Clock  clock.Clock
	Logger *slog.Logger
	// LiveInterval is how often the overview stream sends rows; default 2s.
	LiveInterval time.Duration
	// Stopping, once closed, ends the overview streams (ui.Options.Stopping).
	Stopping <-chan struct{}
	// Location formats times; default UTC.
	Location *time.Location
}

// Pages renders the UI.
type Pages struct {
	o     Options
	tmpl  map[string]*template.Template
	asset string
}

// New parses the templates.
func New(o Options) (*Pages, error) {
	if o.Rules == nil || o.Auth == nil {
		return nil, fmt.Errorf("%w: Options.Rules and Options.Auth are required", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.AuditChecker == nil {
		o.AuditChecker = versioning.NewAuditChecker(o.Rules, versioning.AuditCheckerOptions{Clock: o.Clock})
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LiveInterval <= 0 {
		o.LiveInterval = 2 * time.Second
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	p := &Pages{o: o, tmpl: map[string]*template.Template{}, asset: assets.Version()}
	base, err := template.New("layout").Funcs(p.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("pages: %w", err)
	}
	for _, name := range []string{"login", "password", "account", "overview", "service", "timeline", "version", "diff", "rollback", "propose", "recommendations", "recommendation", "alerts", "audit", "settings", "emergency", "alertingrollback"} {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("pages: %s: %w", name, err)
		}
		p.tmpl[name] = t
	}
	return p, nil
}

// Banner is a message at the top of a page.
type Banner struct {
	Kind string // error, warn, ok
	Text string
}

// view is what every template gets.
type view struct {
	Title, Nav   string
	Principal    *auth.Principal
	CSRF         string
	IsAdmin      bool
	AssetVersion string
	Banners      []Banner
	Data         any
}

// render executes a page into a buffer first, so a template error never
// leaves half a page.
func (p *Pages) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any, banners ...Banner) {
	pr := auth.FromContext(r.Context())
	v := view{Title: title, Nav: nav, Principal: pr, AssetVersion: p.asset, Banners: banners, Data: data}
	if pr != nil {
		if pr.Degraded {
			v.Banners = append([]Banner{{"error", "The database is unavailable: you can read what is still reachable; changes are refused until it is back."}}, v.Banners...)
		}
		v.IsAdmin = pr.Has(versioning.RoleAdmin)
		if pr.Session != nil {
			v.CSRF = pr.Session.CSRF
		}
	}
	var buf bytes.Buffer
	if err := p.tmpl[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		p.fail(w, r, fmt.Errorf("pages: render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail writes an error page; the one place errors become responses is
// package httperr.
func (p *Pages) fail(w http.ResponseWriter, r *http.Request, err error) {
	httperr.Write(w, r, p.o.Logger, err)
}

// OnError is the auth middleware's error writer.
func (p *Pages) OnError(w http.ResponseWriter, r *http.Request, err error) { p.fail(w, r, err) }
