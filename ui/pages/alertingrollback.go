package pages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

// alertingRollbackData is the page that rolls the alerting configuration
// back to an earlier version: what changes against the version in force,
// then a reason and the confirmation (as a rule rollback).
type alertingRollbackData struct {
	Target configstore.Version
	// Current is the version in force the changes are computed against;
	// the form sends its number back as "base", and the rollback applies
	// only while it is still the newest.
	Current configstore.Version
	Changes []versioning.Change
	// Why disables the form.
	Why, Error string
	// Invalid names the form field Error is about ("comment", "confirm").
	Invalid string
	// Comment is the reason already typed, kept when the form comes back.
	Comment string
}

func (p *Pages) alertingRollbackData(r *http.Request) (alertingRollbackData, error) {
	if p.o.AlertRouting == nil {
		return alertingRollbackData{}, fmt.Errorf("%w: the alerting configuration is not stored here", httperr.ErrUnavailable)
	}
	n, err := intParam(r, "n")
	if err != nil {
		return alertingRollbackData{}, err
	}
	target, err := p.o.AlertRouting.Get(r.Context(), n)
	if err != nil {
		return alertingRollbackData{}, err
	}
	current, err := p.o.AlertRouting.Latest(r.Context())
	if err != nil {
		// The target exists, so a version is in force.
		return alertingRollbackData{}, err
	}
	d := alertingRollbackData{Target: target, Current: current}
	if d.Changes, err = documentDiff(current.Document, target.Document); err != nil {
		return d, err
	}
	if target.Number == current.Number {
		d.Why = fmt.Sprintf("version %d is in force", target.Number)
	}
	return d, nil
}

func (p *Pages) renderAlertingRollback(w http.ResponseWriter, r *http.Request, status int, d alertingRollbackData) {
	p.render(w, r, status, "alertingrollback", "Roll back the alerting configuration", "settings", d)
}

func (p *Pages) alertingRollbackForm(w http.ResponseWriter, r *http.Request) {
	d, err := p.alertingRollbackData(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.renderAlertingRollback(w, r, http.StatusOK, d)
}

// rollbackAlerting stores the target's document as a new version. The
// store announces it as it announces a save, so the engine applies it the
// same way.
func (p *Pages) rollbackAlerting(w http.ResponseWriter, r *http.Request) {
	d, err := p.alertingRollbackData(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d.Comment = strings.TrimSpace(r.PostFormValue("comment"))
	if r.PostFormValue("confirm") != "yes" {
		d.Error, d.Invalid = "Confirm that you reviewed the changes.", "confirm"
		p.renderAlertingRollback(w, r, http.StatusUnprocessableEntity, d)
		return
	}
	base, perr := strconv.ParseInt(r.PostFormValue("base"), 10, 64)
	if perr != nil || base < 1 {
		p.fail(w, r, httperrBad("base must be the version the preview was computed against"))
		return
	}
	actor := auth.FromContext(r.Context()).Actor()
	_, err = p.o.AlertRouting.Rollback(r.Context(), configstore.RollbackRequest{To: d.Target.Number, Base: base,
		Author: actor.Name, Roles: actor.Roles, Comment: d.Comment})
	if err == nil {
		http.Redirect(w, r, "/settings#alerting", http.StatusSeeOther)
		return
	}
	status, _ := httperr.Status(err)
	if status >= 500 {
		p.fail(w, r, err)
		return
	}
	switch {
	case errors.Is(err, configstore.ErrConflict):
		// Back to a fresh preview: against the version in force now.
		comment := d.Comment
		if d, err = p.alertingRollbackData(r); err != nil {
			p.fail(w, r, err)
			return
		}
		d.Comment = comment
		if p.sameAlertingRollback(d, base, actor) {
			// A second submission of a form already applied (a double
			// click, a resent POST): its rollback is in force.
			http.Redirect(w, r, "/settings#alerting", http.StatusSeeOther)
			return
		}
		d.Error = fmt.Sprintf("Nothing was rolled back: version %d was saved after this preview was computed against version %d. "+
			"The changes below are against version %d now; review them and roll back again.", d.Current.Number, base, d.Current.Number)
	case errors.Is(err, alerts.ErrInvalid):
		d.Error = strings.TrimPrefix(httperr.Message(err), alerts.ErrInvalid.Error()+": ")
		if strings.HasPrefix(d.Error, "comment:") {
			d.Invalid = "comment"
		}
	default:
		d.Error = httperr.Message(err)
	}
	p.renderAlertingRollback(w, r, status, d)
}

// sameAlertingRollback tells a rollback form submitted again after it was
// applied: the version in force is base+1, saved by the same person with
// the target's document.
func (p *Pages) sameAlertingRollback(d alertingRollbackData, base int64, by versioning.Actor) bool {
	c := d.Current
	return c.Number == base+1 && c.Document == d.Target.Document && versioning.SamePerson(c.Author, by.Name)
}

// documentDiff lists the differences from the alerting document a to b:
// object keys by name, lists of named objects (receivers) by name, other
// lists of objects (routes, whose order matters) by position, other values
// as a whole. Values are shown masked, so no secret is; a secret that
// changed behind the same mask says so.
func documentDiff(a, b string) ([]versioning.Change, error) {
	var ta, tb [2]any // raw, masked
	for i, doc := range []string{a, b} {
		m, err := configstore.Mask(doc)
		if err != nil {
			return nil, err
		}
		t := &ta
		if i == 1 {
			t = &tb
		}
		for j, text := range []string{doc, m} {
			dec := json.NewDecoder(strings.NewReader(text))
			dec.UseNumber()
			if err := dec.Decode(&t[j]); err != nil {
				return nil, fmt.Errorf("pages: alerting document: %w", err)
			}
		}
	}
	var out []versioning.Change
	diffTree("", node{ta[0], ta[1]}, node{tb[0], tb[1]}, &out)
	return out, nil
}

// node is a value of a document and the same value masked (Mask changes
// strings only, so both have the same shape).
type node struct{ raw, masked any }

func (n node) key(k string) (node, bool) {
	v, ok := n.raw.(map[string]any)[k]
	return node{v, n.masked.(map[string]any)[k]}, ok
}

func (n node) index(i int) node { return node{n.raw.([]any)[i], n.masked.([]any)[i]} }

func diffTree(path string, a, b node, out *[]versioning.Change) {
	switch av := a.raw.(type) {
	case map[string]any:
		if bv, ok := b.raw.(map[string]any); ok {
			keys := slices.Concat(slices.Collect(maps.Keys(av)), slices.Collect(maps.Keys(bv)))
			slices.Sort(keys)
			for _, k := range slices.Compact(keys) {
				p := k
				if path != "" {
					p = path + "." + k
				}
				ea, inA := a.key(k)
				eb, inB := b.key(k)
				diffEntry(p, ea, eb, inA, inB, out)
			}
			return
		}
	case []any:
		if bv, ok := b.raw.([]any); ok && objects(av) && objects(bv) {
			if na, nb := names(av), names(bv); na != nil && nb != nil && len(av)+len(bv) > 0 {
				all := slices.Concat(slices.Collect(maps.Keys(na)), slices.Collect(maps.Keys(nb)))
				slices.Sort(all)
				for _, n := range slices.Compact(all) {
					ia, inA := na[n]
					ib, inB := nb[n]
					var ea, eb node
					if inA {
						ea = a.index(ia)
					}
					if inB {
						eb = b.index(ib)
					}
					diffEntry(path+"["+n+"]", ea, eb, inA, inB, out)
				}
				return
			}
			for i := range max(len(av), len(bv)) {
				var ea, eb node
				if i < len(av) {
					ea = a.index(i)
				}
				if i < len(bv) {
					eb = b.index(i)
				}
				diffEntry(path+"["+strconv.Itoa(i)+"]", ea, eb, i < len(av), i < len(bv), out)
			}
			return
		}
	}
	if bytes.Equal(encodeJSON(a.raw), encodeJSON(b.raw)) {
		return
	}
	c := versioning.Change{Path: path, Op: versioning.OpChanged, Old: encodeJSON(a.masked), New: encodeJSON(b.masked)}
	if bytes.Equal(c.Old, c.New) {
		if s, ok := b.masked.(string); ok {
			c.New = encodeJSON(s + " (another secret)")
		}
	}
	*out = append(*out, c)
}

func diffEntry(path string, a, b node, inA, inB bool, out *[]versioning.Change) {
	switch {
	case !inA:
		*out = append(*out, versioning.Change{Path: path, Op: versioning.OpAdded, New: encodeJSON(b.masked)})
	case !inB:
		*out = append(*out, versioning.Change{Path: path, Op: versioning.OpRemoved, Old: encodeJSON(a.masked)})
	default:
		diffTree(path, a, b, out)
	}
}

func objects(l []any) bool {
	for _, e := range l {
		if _, ok := e.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// names indexes a list of objects by their distinct string names; nil if
// some entry has none or shares it.
func names(l []any) map[string]int {
	m := make(map[string]int, len(l))
	for i, e := range l {
		n, ok := e.(map[string]any)["name"].(string)
		if _, dup := m[n]; !ok || dup {
			return nil
		}
		m[n] = i
	}
	return m
}

// encodeJSON is compact JSON as typed: masks ("<masked>") are not escaped.
func encodeJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
