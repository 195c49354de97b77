package pages

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/alerts"
	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

type alertsData struct {
	Firing, History []model.Alert
	Why             string
	// Silences are the silences by matchers in force or to come, each with
	// the version its expire form carries; SilencesShown when listed at
	// all (Options.AlertService set).
	Silences      []alertsapi.Silence
	SilencesShown bool
}

func (p *Pages) alerts(w http.ResponseWriter, r *http.Request) {
	p.alertsPage(w, r, http.StatusOK)
}

// alertsPage renders the alerts page with status, banners first (a
// refused form's reason).
func (p *Pages) alertsPage(w http.ResponseWriter, r *http.Request, status int, banners ...Banner) {
	d := alertsData{}
	if !auth.FromContext(r.Context()).Has(alertRoles...) {
		d.Why = "you need the operator or admin role"
	}
	if p.o.AlertService != nil {
		d.SilencesShown = true
		d.Silences = p.o.AlertService.Silences([]silence.State{silence.StateActive, silence.StatePending})
	}
	if p.o.Alerts == nil {
		d.Why = "alerting is not configured"
		p.render(w, r, status, "alerts", "Alerts", "alerts", d, append(banners, Banner{"warn", "Alerting is not configured in this process."})...)
		return
	}
	var err error
	if d.Firing, err = p.o.Alerts.Firing(r.Context()); err != nil {
		banners = append(banners, Banner{"error", "Firing alerts are unavailable: " + httperr.Message(err)})
	}
	if d.History, err = p.o.Alerts.History(r.Context(), 100); err != nil {
		banners = append(banners, Banner{"error", "Alert history is unavailable: " + httperr.Message(err)})
	}
	p.render(w, r, status, "alerts", "Alerts", "alerts", d, banners...)
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

// expireSilence answers the expire form of a silence listed on the alerts
// page, which carries the version the page showed: a silence changed
// since (edited in place by someone else, replaced by an edit of its
// matchers, or ended) is left as it is, and the alerts page comes back
// with the refusal and its status (409), listing the silences as they are
// now, for the person to decide again on what they can see. Nothing of
// the refusal comes from the URL: an unknown silence is said in fixed
// words, and the version is checked before it reaches the alerts.
func (p *Pages) expireSilence(w http.ResponseWriter, r *http.Request) {
	if p.o.AlertService == nil {
		p.fail(w, r, httperr.ErrUnavailable)
		return
	}
	version := r.PostFormValue("version")
	if !model.IsSilenceVersion(version) {
		p.fail(w, r, httperrBad("version: the expire form carries the version of the silence it showed; reload the alerts page"))
		return
	}
	err := p.o.AlertService.ExpireSilenceIf(r.Context(), chi.URLParam(r, "id"), version)
	if err == nil {
		http.Redirect(w, r, "/alerts", http.StatusSeeOther)
		return
	}
	status, _ := httperr.Status(err)
	if status >= 500 && status != http.StatusServiceUnavailable {
		p.fail(w, r, err)
		return
	}
	msg := httperr.Message(err)
	if errors.Is(err, alerts.ErrNotFound) {
		msg = "that silence does not exist. The silences below are as they are now."
	}
	p.alertsPage(w, r, status, Banner{"error", "The silence was not expired: " + msg})
}
