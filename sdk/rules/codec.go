package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// Decode parses untrusted JSON into a validated Ruleset. Unknown fields,
// trailing data, payloads over MaxBytes and invalid values are refused with an
// error wrapping ErrInvalid; a *ValidationError names each field.
func Decode(data []byte) (*Ruleset, error) {
	var r Ruleset
	if err := decodeStrict(data, &r, MaxBytes); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

func decodeStrict(data []byte, v any, limit int) error {
	if len(data) > limit {
		return &ValidationError{Errors: []FieldError{{Field: "", Problem: fmt.Sprintf("payload is %d bytes, at most %d allowed", len(data), limit)}}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &ValidationError{Errors: []FieldError{jsonFieldError(err)}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &ValidationError{Errors: []FieldError{{Field: "", Problem: "unexpected data after the JSON object"}}}
	}
	return nil
}

// jsonFieldError turns an encoding/json error into a field error.
func jsonFieldError(err error) FieldError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return FieldError{Field: te.Field, Problem: typeProblem(te)}
	case errors.As(err, &se):
		return FieldError{Field: "", Problem: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return FieldError{Field: name, Problem: "is not a known field"}
	case errors.Is(err, io.EOF):
		return FieldError{Field: "", Problem: "payload is empty"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return FieldError{Field: "", Problem: "payload ends in the middle of the JSON"}
	default:
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if i := strings.Index(msg, "Go struct field "); i >= 0 {
			// "cannot unmarshal ... into Go struct field Ruleset.routes.rate_limit.burst of type int"
			rest := msg[i+len("Go struct field "):]
			if j := strings.Index(rest, " "); j > 0 {
				path := rest[:j]
				if k := strings.Index(path, "."); k >= 0 {
					path = path[k+1:]
				}
				return FieldError{Field: path, Problem: msg}
			}
		}
		return FieldError{Field: "", Problem: msg}
	}
}

// typeProblem says what is wrong with a value of the wrong type.
func typeProblem(te *json.UnmarshalTypeError) string {
	number := strings.HasPrefix(te.Value, "number")
	switch k := te.Type.Kind(); {
	case te.Type == durationType && strings.HasPrefix(te.Value, `"`):
		return "invalid duration " + te.Value + `: use a duration such as "150ms" or "2s"`
	case te.Type == durationType:
		return `must be a duration string such as "150ms", got ` + te.Value
	case number && (k == reflect.Int || k == reflect.Int64 || k == reflect.Int32):
		// A fraction, or an integer too large for the field.
		return "must be a whole number within range, got " + te.Value
	case number && (k == reflect.Float64 || k == reflect.Float32):
		return "is out of range, got " + te.Value
	}
	return fmt.Sprintf("must be %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
}

func jsonKind(k string) string {
	switch k {
	case "float64", "float32", "int", "int64", "int32":
		return "a number"
	case "struct", "map", "ptr":
		return "an object"
	case "slice", "array":
		return "a list"
	}
	return "a " + k
}

// Canonical returns the byte-stable encoding of the ruleset: routes and
// downstreams sorted by name, methods and exemption lists sorted, map keys
// sorted, no insignificant white space. Equal rulesets have equal encodings.
func (r *Ruleset) Canonical() ([]byte, error) {
	return json.Marshal(r.sorted())
}

func routeByName(a, b Route) int           { return strings.Compare(a.Name, b.Name) }
func downstreamByName(a, b Downstream) int { return strings.Compare(a.Name, b.Name) }

// sorted returns r when its lists are already in canonical order (as in
// every envelope, which carries the canonical encoding), or else a copy that
// shares everything with r except the lists it sorts. r is never modified.
func (r *Ruleset) sorted() *Ruleset {
	if r == nil || r.inOrder() {
		return r
	}
	c := *r
	c.Routes = slices.Clone(r.Routes)
	slices.SortFunc(c.Routes, routeByName)
	c.Downstreams = slices.Clone(r.Downstreams)
	slices.SortFunc(c.Downstreams, downstreamByName)
	for i := range c.Routes {
		rt := &c.Routes[i]
		if !slices.IsSorted(rt.Match.Methods) {
			rt.Match.Methods = slices.Sorted(slices.Values(rt.Match.Methods))
		}
		if e := rt.Exempt; e != nil && (!slices.IsSorted(e.Paths) || !slices.IsSorted(e.Callers)) {
			ce := *e
			if !slices.IsSorted(e.Paths) {
				ce.Paths = slices.Sorted(slices.Values(e.Paths))
			}
			if !slices.IsSorted(e.Callers) {
				ce.Callers = slices.Sorted(slices.Values(e.Callers))
			}
			rt.Exempt = &ce
		}
	}
	return &c
}

// inOrder reports whether every list Canonical sorts is already sorted.
func (r *Ruleset) inOrder() bool {
	if !slices.IsSortedFunc(r.Routes, routeByName) || !slices.IsSortedFunc(r.Downstreams, downstreamByName) {
		return false
	}
	for i := range r.Routes {
		rt := &r.Routes[i]
		if !slices.IsSorted(rt.Match.Methods) {
			return false
		}
		if e := rt.Exempt; e != nil && (!slices.IsSorted(e.Paths) || !slices.IsSorted(e.Callers)) {
			return false
		}
	}
	return true
}

// Checksum returns "sha256:<hex>" of the canonical encoding.
func (r *Ruleset) Checksum() (string, error) {
	b, err := r.Canonical()
	if err != nil {
		return "", err
	}
	return ChecksumOf(b), nil
}

// ChecksumOf returns "sha256:<hex>" of already canonical bytes.
func ChecksumOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	var b [len("sha256:") + 2*sha256.Size]byte
	copy(b[:], "sha256:")
	hex.Encode(b[len("sha256:"):], sum[:])
	return string(b[:])
}

// Clone returns a deep copy.
func (r *Ruleset) Clone() *Ruleset {
	if r == nil {
		return nil
	}
	// A JSON round trip is exact for this schema and keeps Clone in step with
	// every field added later.
	b, err := json.Marshal(r)
	if err != nil {
		panic("rules: clone: " + err.Error())
	}
	var c Ruleset
	if err := json.Unmarshal(b, &c); err != nil {
		panic("rules: clone: " + err.Error())
	}
	return &c
}

// Envelope is a published rule version as it travels to the SDKs: the service,
// its version number, the checksum and the ruleset itself.
type Envelope struct {
	Service  string   `json:"service"`
	Version  int64    `json:"version"`
	Checksum string   `json:"checksum"`
	Ruleset  *Ruleset `json:"ruleset"`
}

// NewEnvelope wraps a valid ruleset with its version and checksum.
func NewEnvelope(version int64, r *Ruleset) (*Envelope, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	sum, err := r.Checksum()
	if err != nil {
		return nil, err
	}
	return &Envelope{Service: r.Service, Version: version, Checksum: sum, Ruleset: r}, nil
}

// DecodeEnvelope parses and verifies an envelope: at most MaxEnvelopeBytes,
// strict JSON, a valid ruleset for the envelope's service, a positive version
// and a matching checksum. Every failure wraps ErrInvalid.
func DecodeEnvelope(data []byte) (*Envelope, error) {
	var e Envelope
	if err := decodeStrict(data, &e, MaxEnvelopeBytes); err != nil {
		return nil, err
	}
	if err := e.Verify(); err != nil {
		return nil, err
	}
	return &e, nil
}

// Verify checks an envelope's version, service and checksum and validates its
// ruleset.
func (e *Envelope) Verify() error {
	var errs []FieldError
	if e.Version <= 0 {
		errs = append(errs, FieldError{Field: "version", Problem: fmt.Sprintf("must be above 0, got %d", e.Version)})
	}
	if e.Ruleset == nil {
		errs = append(errs, FieldError{Field: "ruleset", Problem: "is required"})
		return &ValidationError{Errors: errs}
	}
	if err := e.Ruleset.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			for _, fe := range ve.Errors {
				errs = append(errs, FieldError{Field: "ruleset." + fe.Field, Problem: fe.Problem})
			}
		}
		return &ValidationError{Errors: errs}
	}
	if e.Service != e.Ruleset.Service {
		errs = append(errs, FieldError{Field: "service", Problem: fmt.Sprintf("%q does not match ruleset.service %q", e.Service, e.Ruleset.Service)})
	}
	if sum, err := e.Ruleset.Checksum(); err != nil || sum != e.Checksum {
		errs = append(errs, FieldError{Field: "checksum", Problem: fmt.Sprintf("%q does not match the ruleset's %q", e.Checksum, sum)})
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}
