package pages

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

// emergencyData is the emergency publish page: the edited ruleset, and
// once it parses, its diff against the active version and the
// confirmation step.
type emergencyData struct {
	Service, YAML, Reason, Error string
	Active                       *versioning.Version
	Fields                       []rules.FieldError
	// Preview: the ruleset is valid; Changes is what publishing changes.
	Preview bool
	Changes []versioning.Change
	// Checksum of the previewed ruleset: a confirmation publishes only
	// the ruleset whose diff was shown.
	Checksum string
}

const emergencyTitle = "Emergency publish: "

func (p *Pages) emergencyBase(r *http.Request) (emergencyData, *rules.Ruleset, error) {
	svc, err := serviceParam(r)
	if err != nil {
		return emergencyData{}, nil, err
	}
	d := emergencyData{Service: svc}
	active, err := p.o.Rules.Active(r.Context(), svc)
	switch {
	case err == nil:
		d.Active = &active
		return d, active.Ruleset, nil
	case errors.Is(err, versioning.ErrNotFound):
		return d, nil, nil
	}
	return d, nil, err
}

func (p *Pages) emergencyForm(w http.ResponseWriter, r *http.Request) {
	d, active, err := p.emergencyBase(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d.YAML = "service: " + d.Service + "\n"
	if active != nil {
		d.YAML = fmtYAML(active)
	}
	p.render(w, r, http.StatusOK, "emergency", emergencyTitle+d.Service, "overview", d)
}

// emergency is a two-step form without JavaScript: the first post
// validates the ruleset and shows the diff against the active version;
// only a post with the confirmation checked publishes.
func (p *Pages) emergency(w http.ResponseWriter, r *http.Request) {
	d, active, err := p.emergencyBase(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d.YAML, d.Reason = r.PostFormValue("ruleset"), strings.TrimSpace(r.PostFormValue("reason"))
	rs, err := versioning.DecodeRuleset(versioning.FormatYAML, []byte(d.YAML))
	if err == nil && rs.Service != "" && rs.Service != d.Service {
		err = &versioning.InputError{Errors: []rules.FieldError{{Field: "service", Problem: fmt.Sprintf("is %q; this page publishes %q", rs.Service, d.Service)}}}
	}
	if err == nil {
		err = rs.Validate()
	}
	if err != nil {
		p.emergencyError(w, r, d, err)
		return
	}
	d.Preview, d.Changes = true, versioning.Diff(active, rs)
	if d.Checksum, err = rs.Checksum(); err != nil {
		p.emergencyError(w, r, d, err)
		return
	}
	if d.Reason == "" {
		d.Fields = []rules.FieldError{{Field: "reason", Problem: "required: say why this skips approval"}}
		d.Error = "Give the reason before publishing."
		p.render(w, r, http.StatusUnprocessableEntity, "emergency", emergencyTitle+d.Service, "overview", d)
		return
	}
	if r.PostFormValue("confirm") != "yes" || r.PostFormValue("previewed") != d.Checksum {
		status := http.StatusOK
		switch {
		case r.PostFormValue("step") != "publish":
		case r.PostFormValue("previewed") != d.Checksum:
			d.Error = "The ruleset changed since the preview: review the new changes and confirm again."
		default:
			status, d.Error = http.StatusUnprocessableEntity, "Confirm that you reviewed the changes and want them live now."
		}
		p.render(w, r, status, "emergency", emergencyTitle+d.Service, "overview", d)
		return
	}
	v, err := p.o.Rules.EmergencyPublish(r.Context(), versioning.Proposal{Service: d.Service, Ruleset: rs,
		Author: auth.FromContext(r.Context()).Actor(), Reason: d.Reason, Source: versioning.SourceUser})
	if err != nil {
		p.emergencyError(w, r, d, err)
		return
	}
	http.Redirect(w, r, "/services/"+v.Service+"/rules/"+strconv.FormatInt(v.Number, 10), http.StatusSeeOther)
}

func (p *Pages) emergencyError(w http.ResponseWriter, r *http.Request, d emergencyData, err error) {
	status, _ := httperr.Status(err)
	if status >= 500 {
		p.fail(w, r, err)
		return
	}
	d.Preview, d.Changes = false, nil
	if d.Fields = httperr.Fields(err); d.Fields == nil {
		d.Error = httperr.Message(err)
	} else {
		d.Error = "Nothing was published: fix the fields below."
	}
	p.render(w, r, status, "emergency", emergencyTitle+d.Service, "overview", d)
}
