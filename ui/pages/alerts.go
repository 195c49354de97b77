package pages

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

type alertsData struct {
	Firing, History []model.Alert
	Why             string
}

func (p *Pages) alerts(w http.ResponseWriter, r *http.Request) {
	d := alertsData{}
	if !auth.FromContext(r.Context()).Has(alertRoles...) {
		d.Why = "you need the operator or admin role"
	}
	if p.o.Alerts == nil {
		d.Why = "alerting is not configured"
		p.render(w, r, http.StatusOK, "alerts", "Alerts", "alerts", d, Banner{"warn", "Alerting is not configured in this process."})
		return
	}
	var banners []Banner
	var err error
	if d.Firing, err = p.o.Alerts.Firing(r.Context()); err != nil {
		banners = append(banners, Banner{"error", "Firing alerts are unavailable: " + httperr.Message(err)})
	}
	if d.History, err = p.o.Alerts.History(r.Context(), 100); err != nil {
		banners = append(banners, Banner{"error", "Alert history is unavailable: " + httperr.Message(err)})
	}
	p.render(w, r, http.StatusOK, "alerts", "Alerts", "alerts", d, banners...)
}

func (p *Pages) ack(w http.ResponseWriter, r *http.Request) {
	if p.o.Alerts == nil {
		p.fail(w, r, httperr.ErrUnavailable)
		return
	}
	id := chi.URLParam(r, "id")
	if _, err := p.o.Alerts.Ack(r.Context(), id, auth.FromContext(r.Context()).User.Name); err != nil {
		p.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/alerts", http.StatusSeeOther)
}

func (p *Pages) silence(w http.ResponseWriter, r *http.Request) {
	if p.o.Alerts == nil {
		p.fail(w, r, httperr.ErrUnavailable)
		return
	}
	s, err := model.ParseSilence(r.PostFormValue("service"), r.PostFormValue("tier"), r.PostFormValue("for"), r.PostFormValue("comment"), p.o.Clock.Now())
	if err != nil {
		p.fail(w, r, err)
		return
	}
	s.By = auth.FromContext(r.Context()).User.Name
	if err := p.o.Alerts.Silence(r.Context(), s); err != nil {
		p.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/alerts", http.StatusSeeOther)
}
