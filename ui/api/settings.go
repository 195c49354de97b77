package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

// AlertingVersion is a saved alerting document as the API returns it:
// secrets masked, with its receivers and routes.
type AlertingVersion struct {
	Number    int64                `json:"number"`
	Document  string               `json:"document"`
	Author    string               `json:"author,omitempty"`
	Comment   string               `json:"comment,omitempty"`
	CreatedAt string               `json:"created_at,omitempty"`
	Summary   *configstore.Summary `json:"summary,omitempty"`
}

// AlertingResponse is GET /settings/alerting: the version in force, or
// number 0 and source "file" while the bootstrap document applies.
type AlertingResponse struct {
	Source  string          `json:"source"`
	Version AlertingVersion `json:"version"`
}

func maskedVersion(v configstore.Version) (AlertingVersion, error) {
	doc, err := configstore.Mask(v.Document)
	if err != nil {
		return AlertingVersion{}, err
	}
	out := AlertingVersion{Number: v.Number, Document: doc, Author: v.Author, Comment: v.Comment}
	if !v.CreatedAt.IsZero() {
		out.CreatedAt = v.CreatedAt.Format("2006-01-02T15:04:05.999999999Z07:00")
	}
	if c, err := v.Config(); err == nil {
		s := configstore.Summarize(c)
		out.Summary = &s
	}
	return out, nil
}

func (a *API) routing(w http.ResponseWriter, r *http.Request) bool {
	if a.o.AlertRouting == nil {
		a.fail(w, r, fmt.Errorf("%w: the alerting configuration is not stored here", httperr.ErrUnavailable))
		return false
	}
	return true
}

func (a *API) alerting(w http.ResponseWriter, r *http.Request) {
	if !a.routing(w, r) {
		return
	}
	v, err := a.o.AlertRouting.Latest(r.Context())
	resp := AlertingResponse{Source: "saved"}
	switch {
	case errors.Is(err, alerts.ErrNotFound):
		resp.Source = "file"
		if a.o.AlertBootstrap == "" {
			resp.Source = "builtin"
		}
		v, err = configstore.Version{Document: a.o.AlertBootstrap}, nil
		if v.Document == "" {
			writeJSON(w, http.StatusOK, resp)
			return
		}
	case err != nil:
		a.fail(w, r, err)
		return
	}
	if resp.Version, err = maskedVersion(v); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *API) alertingVersions(w http.ResponseWriter, r *http.Request) {
	if !a.routing(w, r) {
		return
	}
	q := r.URL.Query()
	var bad []rules.FieldError
	before := cursor(q, "before", &bad)
	limit := pageLimit(q, 50, &bad)
	if len(bad) > 0 {
		a.fail(w, r, &versioning.InputError{Errors: bad})
		return
	}
	// Versions are numbered 1, 2, ... without gaps (each save is its
	// base+1, none is deleted): a full page of the most a query returns
	// has older ones past it when its last is above 1.
	vs, more, err := fetchPage(limit, func(n int) ([]configstore.Version, error) {
		return a.o.AlertRouting.ListPage(r.Context(), configstore.ListOptions{Limit: n, Before: before})
	}, func(last configstore.Version) (bool, error) { return last.Number > 1, nil })
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]AlertingVersion, 0, len(vs))
	for _, v := range vs {
		mv, err := maskedVersion(v)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		mv.Summary = nil
		out = append(out, mv)
	}
	var next int64
	if len(out) > 0 {
		next = out[len(out)-1].Number
	}
	writeJSON(w, http.StatusOK, paged("versions", out, more, "before", next))
}

// AlertingRequest is the body of PUT /settings/alerting.
type AlertingRequest struct {
	// Document is the alerting document as a JSON string or object; masked
	// secrets keep the values of Base.
	Document json.RawMessage `json:"document"`
	Base     int64           `json:"base"`
	Comment  string          `json:"comment"`
}

func (a *API) saveAlerting(w http.ResponseWriter, r *http.Request) {
	if !a.routing(w, r) {
		return
	}
	var req AlertingRequest
	if err := a.decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	doc := string(req.Document)
	var s string
	if json.Unmarshal(req.Document, &s) == nil {
		doc = s
	}
	// The first version keeps the secrets of the configuration file's
	// document where it holds masks.
	if req.Base == 0 && a.o.AlertBootstrap != "" {
		unmasked, err := configstore.Unmask(doc, a.o.AlertBootstrap)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		doc = unmasked
	}
	// The store records the audit entry in the save's transaction.
	actor := auth.FromContext(r.Context()).Actor()
	v, err := a.o.AlertRouting.Save(r.Context(), configstore.SaveRequest{Document: doc, Base: req.Base,
		Author: actor.Name, Roles: actor.Roles, Comment: req.Comment})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	mv, err := maskedVersion(v)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, mv)
}

// AlertingRollbackRequest is the body of POST /settings/alerting/rollback.
type AlertingRollbackRequest struct {
	// To is the earlier version whose document, its own secrets included,
	// the new version holds.
	To int64 `json:"to"`
	// Base is the version in force when the rollback was decided: 409,
	// nothing stored, if another version was saved since.
	Base    int64  `json:"base"`
	Comment string `json:"comment"`
}

// rollbackAlerting stores an earlier version's document as a new version;
// the engine applies it as it applies a save.
func (a *API) rollbackAlerting(w http.ResponseWriter, r *http.Request) {
	if !a.routing(w, r) {
		return
	}
	var req AlertingRollbackRequest
	if err := a.decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	if bad := alertingRollbackProblems(req.To, req.Base, req.Comment); len(bad) > 0 {
		a.fail(w, r, &versioning.InputError{Errors: bad})
		return
	}
	actor := auth.FromContext(r.Context()).Actor()
	v, err := a.o.AlertRouting.Rollback(r.Context(), configstore.RollbackRequest{To: req.To, Base: req.Base,
		Author: actor.Name, Roles: actor.Roles, Comment: req.Comment})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	mv, err := maskedVersion(v)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, mv)
}

// alertingRollbackProblems names what is wrong with a rollback's to, base
// and comment before the store is asked (which checks the rest: that to
// exists and is still valid, the comment's length).
func alertingRollbackProblems(to, base int64, comment string) []rules.FieldError {
	var bad []rules.FieldError
	if base < 1 {
		bad = append(bad, rules.FieldError{Field: "base", Problem: "must be the version in force when the rollback was decided (1 or more)"})
	}
	switch {
	case to < 1:
		bad = append(bad, rules.FieldError{Field: "to", Problem: "must be the number of an earlier version (1 or more)"})
	case base >= 1 && to >= base:
		bad = append(bad, rules.FieldError{Field: "to", Problem: fmt.Sprintf("version %d is not earlier than the base %d", to, base)})
	}
	if strings.TrimSpace(comment) == "" {
		bad = append(bad, rules.FieldError{Field: "comment", Problem: "say why the alerting configuration is rolled back"})
	}
	return bad
}

// PolicyResponse is a service's policy with the band in force.
type PolicyResponse struct {
	versioning.Policy
	// ConfigBand is the engine's configured band (when this process knows
	// it), in force while Band is null.
	ConfigBand   *versioning.AutoApplyBand `json:"config_band,omitempty"`
	ConfigManual bool                      `json:"config_manual,omitempty"`
}

func (a *API) policyResponse(pol versioning.Policy) PolicyResponse {
	out := PolicyResponse{Policy: pol}
	if a.o.ConfigBand != nil {
		b, manual := a.o.ConfigBand(pol.Service)
		out.ConfigBand, out.ConfigManual = &b, manual
	}
	return out
}

func (a *API) policy(w http.ResponseWriter, r *http.Request) {
	svc, err := service(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	pol, err := a.o.Rules.Policy(r.Context(), svc)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.policyResponse(pol))
}

// PolicyRequest is the body of PUT /services/{service}/policy. Absent
// fields keep their values; "band": null returns to the engine's band.
type PolicyRequest struct {
	ApprovalsRequired *int              `json:"approvals_required"`
	ApproverRoles     []versioning.Role `json:"approver_roles"`
	ManualOnly        *bool             `json:"manual_only"`
	Band              json.RawMessage   `json:"band"`
	// Revision, when set, is the policy revision the change was decided
	// on: the change is refused (409) if the policy changed since.
	Revision *int64 `json:"revision"`
}

func (a *API) setPolicy(w http.ResponseWriter, r *http.Request) {
	svc, err := service(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req PolicyRequest
	if err := a.decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	pol, err := a.o.Rules.Policy(r.Context(), svc)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if req.Revision != nil {
		if *req.Revision < 1 {
			a.fail(w, r, &versioning.InputError{Errors: []rules.FieldError{{Field: "revision", Problem: "must be a revision the policy had (1 or more)"}}})
			return
		}
		pol.Revision = *req.Revision
	}
	if req.ApprovalsRequired != nil {
		pol.ApprovalsRequired = *req.ApprovalsRequired
	}
	if req.ApproverRoles != nil {
		pol.ApproverRoles = slices.Clone(req.ApproverRoles)
	}
	if req.ManualOnly != nil {
		pol.ManualOnly = *req.ManualOnly
	}
	if len(req.Band) > 0 {
		if string(req.Band) == "null" {
			pol.Band = nil
		} else {
			var b versioning.AutoApplyBand
			dec := json.NewDecoder(bytes.NewReader(req.Band))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&b); err != nil {
				fe := decodeProblem(err)
				if fe.Field == "body" {
					fe = rules.FieldError{Field: "band", Problem: "want null or {max_change_per_hour, floor, ceiling}: " + err.Error()}
				} else {
					fe.Field = "band." + fe.Field
				}
				a.fail(w, r, &versioning.InputError{Errors: []rules.FieldError{fe}})
				return
			}
			pol.Band = &b
		}
	}
	out, err := a.o.Rules.SetPolicy(r.Context(), pol, auth.FromContext(r.Context()).Actor())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.policyResponse(out))
}

// EmergencyRequest is the body of POST /services/{service}/emergency.
type EmergencyRequest struct {
	Reason  string          `json:"reason"`
	Ruleset json.RawMessage `json:"ruleset"`
	// DryRun returns the changes against the active version without
	// publishing.
	DryRun bool `json:"dry_run"`
}

func (a *API) emergency(w http.ResponseWriter, r *http.Request) {
	svc, err := service(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req EmergencyRequest
	if err := a.decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	rs, err := versioning.DecodeRuleset(versioning.FormatJSON, req.Ruleset)
	if err == nil {
		err = rs.Validate()
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if req.DryRun {
		var active *rules.Ruleset
		v, err := a.o.Rules.Active(r.Context(), svc)
		switch {
		case err == nil:
			active = v.Ruleset
		case !errors.Is(err, versioning.ErrNotFound):
			a.fail(w, r, err)
			return
		}
		changes := versioning.Diff(active, rs)
		if changes == nil {
			changes = []versioning.Change{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"active": v.Number, "changes": changes})
		return
	}
	v, err := a.o.Rules.EmergencyPublish(r.Context(), versioning.Proposal{Service: svc, Ruleset: rs, Reason: req.Reason,
		Author: auth.FromContext(r.Context()).Actor(), Source: versioning.SourceUser})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}
