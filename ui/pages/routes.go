package pages

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

// Roles each kind of action needs at the door; the rules store checks the
// service's policy again (e.g. which roles may approve).
var (
	anyRole     = []versioning.Role{versioning.RoleViewer, versioning.RoleOperator, versioning.RoleApprover, versioning.RoleAdmin}
	changeRoles = []versioning.Role{versioning.RoleOperator, versioning.RoleApprover, versioning.RoleAdmin}
	alertRoles  = []versioning.Role{versioning.RoleOperator, versioning.RoleAdmin}
	// promoteRoles may make a canary the version for everyone.
	promoteRoles = []versioning.Role{versioning.RoleApprover, versioning.RoleAdmin}
	adminRoles   = []versioning.Role{versioning.RoleAdmin}
)

// Routes mounts the pages on r. The auth middleware (auth.Manager.Middleware)
// must run before them.
func (p *Pages) Routes(r chi.Router) {
	need := func(roles ...versioning.Role) func(http.Handler) http.Handler {
		return auth.Require(p.OnError, roles...)
	}
	r.Get("/login", p.loginForm)
	r.Post("/login", p.login)
	r.With(need()).Post(auth.LogoutPath, p.logout)
	r.With(need()).Get(auth.PasswordPath, p.passwordForm)
	r.With(need()).Post(auth.PasswordPath, p.changePassword)
	r.With(need()).Get("/account", p.account)
	r.With(need()).Post("/account/tokens", p.createToken)
	r.With(need()).Post("/account/tokens/{id}/revoke", p.revokeToken)

	r.Group(func(r chi.Router) {
		r.Use(need(anyRole...))
		r.Get("/", p.overview)
		r.Get("/events/overview", p.overviewEvents)
		r.Get("/services/{service}", p.service)
		r.Get("/services/{service}/rules", p.timeline)
		r.Get("/services/{service}/rules/{n}", p.version)
		r.Get("/services/{service}/diff", p.diff)
		r.Get("/services/{service}/propose", p.proposeForm)
		r.Get("/services/{service}/rollback/{n}", p.rollbackForm)
		r.Get("/recommendations", p.recommendations)
		r.Get("/recommendations/{service}/{n}", p.recommendationPage)
		r.Get("/alerts", p.alerts)
		r.Get("/audit", p.audit)
	})
	r.Group(func(r chi.Router) {
		r.Use(need(changeRoles...))
		r.Post("/services/{service}/propose", p.propose)
		r.Post("/services/{service}/rules/{n}/approve", p.decide(decisionApprove))
		r.Post("/services/{service}/rules/{n}/reject", p.decide(decisionReject))
		r.Post("/services/{service}/rules/{n}/withdraw", p.decide(decisionWithdraw))
		r.Post("/services/{service}/rules/{n}/rebase", p.decide(decisionRebase))
		r.Post("/services/{service}/rollback/{n}", p.rollback)
		r.Post("/services/{service}/canary", p.startCanary)
		r.Post("/services/{service}/canary/abort", p.abortCanary)
	})
	r.With(need(promoteRoles...)).Post("/services/{service}/canary/promote", p.promoteCanary)
	r.Group(func(r chi.Router) {
		r.Use(need(alertRoles...))
		r.Post("/alerts/{id}/ack", p.ack)
		r.Post("/alerts/silence", p.silence)
		r.Post("/alerts/silences/{id}/expire", p.expireSilence)
	})
	r.Group(func(r chi.Router) {
		r.Use(need(adminRoles...))
		r.Get("/settings", p.settings)
		r.Post("/settings/users", p.createUser)
		r.Post("/settings/users/{name}/roles", p.setRoles)
		r.Post("/settings/policies/{service}", p.setPolicy)
		r.Post("/settings/alerting", p.saveAlerting)
		r.Get("/settings/alerting/rollback/{n}", p.alertingRollbackForm)
		r.Post("/settings/alerting/rollback/{n}", p.rollbackAlerting)
		r.Get("/services/{service}/emergency", p.emergencyForm)
		r.Post("/services/{service}/emergency", p.emergency)
	})
}

// serviceParam returns the validated {service} of the path.
func serviceParam(r *http.Request) (string, error) {
	s := chi.URLParam(r, "service")
	if err := versioning.ValidateService(s); err != nil {
		return "", err
	}
	return s, nil
}

func intParam(r *http.Request, name string) (int64, error) {
	v, err := strconv.ParseInt(chi.URLParam(r, name), 10, 64)
	if err != nil || v < 1 {
		return 0, httperrBad(name + " must be a positive number")
	}
	return v, nil
}

func httperrBad(msg string) error { return &badRequest{msg} }

type badRequest struct{ msg string }

func (e *badRequest) Error() string { return httperr.ErrBadRequest.Error() + ": " + e.msg }
func (e *badRequest) Unwrap() error { return httperr.ErrBadRequest }

// safeNext keeps a post-login redirect on this site: a path starting with
// one "/" and holding no backslash and no control character. Browsers read
// "\" as "/" in http(s) URLs and drop tabs and newlines, and http.Redirect
// cleans the path ("/x/../\host" becomes "/\host"), so either could turn a
// path into "//host", another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsFunc(next, func(r rune) bool {
		return r == '\\' || r < 0x20 || r == 0x7f
	}) {
		return "/"
	}
	return next
}
