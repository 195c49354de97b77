package versioning

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"governor.dev/governor/sdk/rules"
)

var actorRE = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N}._@+:/-]*$`)

type fields struct{ errs []rules.FieldError }

func (f *fields) add(field, format string, args ...any) {
	f.errs = append(f.errs, rules.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (f *fields) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	return &InputError{Errors: f.errs}
}

func (f *fields) actor(field string, a Actor) {
	f.actorName(field+".name", a.Name)
	for i, r := range a.Roles {
		if !r.Valid() {
			f.add(fmt.Sprintf("%s.roles[%d]", field, i), "must be viewer, operator, approver or admin, got %q", r)
		}
	}
}

func (f *fields) actorName(field, name string) {
	switch {
	case name == "":
		f.add(field, "is required")
	case len(name) > MaxActorBytes:
		f.add(field, "is longer than %d bytes", MaxActorBytes)
	case !actorRE.MatchString(name):
		f.add(field, "%q may contain only letters, digits and . _ @ + : / -", name)
	}
}

func (f *fields) text(field, s string, max int, required bool) {
	switch {
	case required && strings.TrimSpace(s) == "":
		f.add(field, "is required")
	case len(s) > max:
		f.add(field, "is %d bytes, at most %d allowed", len(s), max)
	case !utf8.ValidString(s):
		f.add(field, "is not valid UTF-8")
	case strings.ContainsRune(s, 0):
		f.add(field, "must not contain NUL bytes") // PostgreSQL's text cannot hold them
	}
}

func (f *fields) service(field, s string) {
	// The ruleset schema's rule for names.
	err := (&rules.Ruleset{Service: s}).Validate()
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		for _, fe := range ve.Errors {
			f.add(field, "%s", fe.Problem)
		}
	}
}

// ValidateActor checks an actor's name and roles; field prefixes the errors.
func ValidateActor(field string, a Actor) error {
	f := &fields{}
	f.actor(field, a)
	return f.err()
}

// ValidateService checks a service name.
func ValidateService(service string) error {
	f := &fields{}
	f.service("service", service)
	return f.err()
}

// ValidateComment checks an optional comment.
func ValidateComment(field, s string) error {
	f := &fields{}
	f.text(field, s, MaxCommentBytes, false)
	return f.err()
}

// ValidateReason checks a required reason.
func ValidateReason(field, s string) error {
	f := &fields{}
	f.text(field, s, MaxReasonBytes, true)
	return f.err()
}

// Validate checks a proposal as a Store does before writing anything and
// reports every problem as an *InputError. It does not check roles or state.
func (p Proposal) Validate() error {
	f := &fields{}
	if p.Ruleset == nil {
		f.add("ruleset", "is required")
	} else {
		if err := p.Ruleset.Validate(); err != nil {
			var ie *InputError
			if errors.As(rulesetError("ruleset.", err), &ie) {
				f.errs = append(f.errs, ie.Errors...)
			}
		} else if b, err := p.Ruleset.Canonical(); err != nil {
			f.add("ruleset", "cannot be encoded: %v", err)
		} else if len(b) > rules.MaxBytes {
			f.add("ruleset", "is %d bytes encoded, at most %d allowed", len(b), rules.MaxBytes)
		}
		if p.Service != "" && p.Service != p.Ruleset.Service {
			f.add("service", "%q does not match ruleset.service %q", p.Service, p.Ruleset.Service)
		}
	}
	if p.BaseVersion < 0 {
		f.add("base_version", "must not be negative, got %d", p.BaseVersion)
	}
	if p.Replaces < 0 {
		f.add("replaces", "must not be negative, got %d", p.Replaces)
	}
	f.actor("author", p.Author)
	f.text("reason", p.Reason, MaxReasonBytes, true)
	if _, ie := compactDetail("evidence", p.Evidence, MaxEvidenceBytes); ie != nil {
		f.errs = append(f.errs, ie.Errors...)
	}
	switch p.Source {
	case "", SourceUser, SourceEngine, SourceImport:
	default:
		f.add("source", "must be user, engine or import, got %q", p.Source)
	}
	if p.AutoApply && p.Source != SourceEngine {
		f.add("auto_apply", "only engine proposals may apply themselves")
	}
	if p.AutoApply && p.Rebase {
		// Its band was judged against BaseVersion: rebased onto another
		// active version (a rollback since, say) it could undo that
		// version unseen.
		f.add("rebase", "a proposal that applies itself is never rebased: it goes live only on the version it was judged against")
	}
	return f.err()
}

// CompactEvidence returns the compact JSON form of evidence (nil if empty).
func CompactEvidence(raw []byte) ([]byte, error) {
	b, ie := compactDetail("evidence", raw, MaxEvidenceBytes)
	if ie != nil {
		return nil, ie
	}
	if string(b) == "{}" && len(raw) == 0 {
		return nil, nil
	}
	return b, nil
}

// CompactDetail returns the compact JSON form of an audit detail ("{}" if
// empty); it must be a JSON object.
func CompactDetail(raw []byte) ([]byte, error) {
	b, ie := compactDetail("detail", raw, MaxDetailBytes)
	if ie != nil {
		return nil, ie
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, invalid("detail", "must be a JSON object")
	}
	return b, nil
}

// Validate checks a policy and fills in defaults for zero fields.
func (p Policy) Validate() (Policy, error) {
	f := &fields{}
	f.service("service", p.Service)
	if p.ApprovalsRequired == 0 {
		p.ApprovalsRequired = 1
	}
	if p.Revision < 0 {
		f.add("revision", "must not be negative, got %d", p.Revision)
	}
	if p.ApprovalsRequired < 1 || p.ApprovalsRequired > 10 {
		f.add("approvals_required", "must be between 1 and 10, got %d", p.ApprovalsRequired)
	}
	if len(p.ApproverRoles) == 0 {
		p.ApproverRoles = DefaultPolicy(p.Service).ApproverRoles
	}
	seen := map[Role]bool{}
	for i, r := range p.ApproverRoles {
		switch {
		case !r.Valid():
			f.add(fmt.Sprintf("approver_roles[%d]", i), "must be viewer, operator, approver or admin, got %q", r)
		case r == RoleViewer:
			f.add(fmt.Sprintf("approver_roles[%d]", i), "viewers may not approve")
		case seen[r]:
			f.add(fmt.Sprintf("approver_roles[%d]", i), "%q is listed twice", r)
		}
		seen[r] = true
	}
	if b := p.Band; b != nil {
		if !(b.MaxChangePerHour >= 0 && b.MaxChangePerHour <= 10) {
			f.add("band.max_change_per_hour", "must be between 0 and 10 (a share of the ceiling: 0.1 is 10%%), got %v", b.MaxChangePerHour)
		}
		for _, fv := range []struct {
			name string
			v    float64
		}{{"band.floor", b.Floor}, {"band.ceiling", b.Ceiling}} {
			if !(fv.v >= 0) || math.IsInf(fv.v, 0) {
				f.add(fv.name, "must be a finite number of requests per second, 0 or above (0: no bound), got %v", fv.v)
			}
		}
		if b.Ceiling > 0 && b.Floor > b.Ceiling {
			f.add("band.floor", "%v req/s is above band.ceiling %v req/s", b.Floor, b.Ceiling)
		}
		band := *b
		p.Band = &band
	}
	return p, f.err()
}
