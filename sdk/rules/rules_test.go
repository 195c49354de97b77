package rules

import (
	"errors"
	"strings"
	"testing"
)

const validJSON = `{
  "service": "checkout",
  "priority": {"levels": {"3": "browse"}, "aliases": {"payment": "critical"}, "default": "core", "user_header": "X-User-ID"},
  "routes": [
    {"name": "orders", "match": {"path_prefix": "/orders", "methods": ["POST", "GET"]},
     "rate_limit": {"rate": 500, "burst": 50},
     "key_rate_limits": [{"key": "header:X-Api-Key", "rate": 10}],
     "concurrency": {"algorithm": "gradient", "min": 4, "max": 200, "probe_interval": "30s"},
     "shedding": {"reserved": 0.1, "consistent_users": true},
     "queue": {"target": "5ms", "interval": "100ms"},
     "warm_up": {"initial_fraction": 0.2, "period": "30s"},
     "exempt": {"paths": ["/healthz"], "callers": ["probe"]}},
    {"name": "all", "match": {"path_prefix": "/"}, "mode": "shadow"}
  ],
  "downstreams": [
    {"name": "payments-db", "timeout": "800ms",
     "breaker": {"window": "10s", "min_calls": 20, "error_ratio": 0.5, "slow_call_ratio": 0.8, "slow_call": "500ms", "half_open_probes": 3},
     "retry": {"max_attempts": 3, "budget": 0.2},
     "bulkhead": {"max_concurrent": 64}}
  ]
}`

func TestDecodeValid(t *testing.T) {
	r, err := Decode([]byte(validJSON))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if r.Service != "checkout" || len(r.Routes) != 2 || r.Routes[0].Concurrency.ProbeInterval.D().Seconds() != 30 {
		t.Fatalf("decoded wrong: %+v", r)
	}
}

func TestDecodeFieldErrors(t *testing.T) {
	tests := []struct {
		name, json, field, problem string
	}{
		{"unknown field", `{"service":"a","bogus":1}`, "bogus", "not a known field"},
		{"missing service", `{}`, "service", "required"},
		{"negative rate", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":-1}}]}`, "routes[0].rate_limit.rate", "above 0"},
		{"bad path", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"x"}}]}`, "routes[0].match.path_prefix", "must start"},
		{"bad method", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/","methods":["get"]}}]}`, "routes[0].match.methods[0]", "HTTP method"},
		{"duplicate route", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"}},{"name":"r","match":{"path_prefix":"/x"}}]}`, "routes[1].name", "already used"},
		{"overlapping match", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"}},{"name":"s","match":{"path_prefix":"/"}}]}`, "routes[1].match", "same requests"},
		{"min above max", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"concurrency":{"min":10,"max":5}}]}`, "routes[0].concurrency.min", "must not exceed"},
		{"bad duration", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"queue":{"target":"soon"}}]}`, "routes.queue.target", `invalid duration "soon"`},
		{"duration not a string", `{"service":"a","downstreams":[{"name":"d","timeout":5}]}`, "downstreams.timeout", `must be a duration string such as "150ms", got number 5`},
		{"fraction for an integer", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":1,"burst":1.5}}]}`, "routes.rate_limit.burst", "must be a whole number within range, got number 1.5"},
		{"integer too large", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":1,"burst":1e30}}]}`, "routes.rate_limit.burst", "whole number within range"},
		{"number too large", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":1e400}}]}`, "routes.rate_limit.rate", "out of range"},
		{"wrong type", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":"fast"}}]}`, "routes.rate_limit.rate", "number"},
		{"bad class", `{"service":"a","priority":{"default":"vip"}}`, "priority.default", "one of"},
		{"bad level", `{"service":"a","priority":{"levels":{"12":"core"}}}`, "priority.levels.12", "digit"},
		{"ratio", `{"service":"a","downstreams":[{"name":"d","breaker":{"error_ratio":1.5}}]}`, "downstreams[0].breaker.error_ratio", "below or equal to 1"},
		{"bulkhead", `{"service":"a","downstreams":[{"name":"d","bulkhead":{}}]}`, "downstreams[0].bulkhead.max_concurrent", "between"},
		{"panic threshold above 1", `{"service":"a","downstreams":[{"name":"d","breaker":{},"balancer":{"panic_threshold":1.5}}]}`,
			"downstreams[0].balancer.panic_threshold", "below or equal to 1"},
		{"negative panic threshold", `{"service":"a","downstreams":[{"name":"d","breaker":{},"balancer":{"panic_threshold":-0.1}}]}`,
			"downstreams[0].balancer.panic_threshold", "must not be negative"},
		{"trailing", `{"service":"a"} {}`, "", "after the JSON"},
		{"empty", ``, "", "empty"},
		{"not json", `nope`, "", "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.json))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err %T is not a *ValidationError", err)
			}
			for _, fe := range ve.Errors {
				if fe.Field == tt.field && strings.Contains(fe.Problem, tt.problem) {
					return
				}
			}
			t.Fatalf("no error for field %q containing %q in %v", tt.field, tt.problem, ve.Errors)
		})
	}
}

// TestDecodeEnvelopeNamesTheFieldOfABadDuration: a duration that does not
// parse is reported at its field, also inside an envelope.
func TestDecodeEnvelopeNamesTheFieldOfABadDuration(t *testing.T) {
	_, err := DecodeEnvelope([]byte(`{"service":"a","version":1,"checksum":"x","ruleset":{"service":"a","downstreams":[{"name":"d","timeout":"1 minute"}]}}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 {
		t.Fatalf("err = %v, want one field error", err)
	}
	if fe := ve.Errors[0]; fe.Field != "ruleset.downstreams.timeout" || !strings.Contains(fe.Problem, `invalid duration "1 minute"`) {
		t.Fatalf("field error %+v, want ruleset.downstreams.timeout: invalid duration", fe)
	}
}

// TestValidateDoesNotSayARouteOverlapsItself: a method listed twice is one
// problem, not also an overlap of the route with itself.
func TestValidateDoesNotSayARouteOverlapsItself(t *testing.T) {
	_, err := Decode([]byte(`{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/","methods":["GET","GET"]}}]}`))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	want := []FieldError{{Field: "routes[0].match.methods[1]", Problem: `"GET" is listed twice`}}
	if len(ve.Errors) != 1 || ve.Errors[0] != want[0] {
		t.Fatalf("errors %v, want %v", ve.Errors, want)
	}
}

func TestDecodeOversized(t *testing.T) {
	big := `{"service":"a","priority":{"aliases":{"` + strings.Repeat("x", MaxBytes) + `":"core"}}}`
	_, err := Decode([]byte(big))
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("err = %v", err)
	}
}

func TestValidateReportsAllErrors(t *testing.T) {
	r := &Ruleset{Routes: []Route{{Match: Match{PathPrefix: "nope"}}}}
	err := r.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 3 {
		t.Fatalf("want 3 errors (service, name, path), got %v", err)
	}
}

func TestCanonicalIsOrderIndependent(t *testing.T) {
	a, err := Decode([]byte(validJSON))
	if err != nil {
		t.Fatal(err)
	}
	b := a.Clone()
	b.Routes[0], b.Routes[1] = b.Routes[1], b.Routes[0]
	b.Routes[1].Match.Methods = []string{"GET", "POST"}
	ca, _ := a.Canonical()
	cb, _ := b.Canonical()
	if string(ca) != string(cb) {
		t.Fatalf("canonical differs:\n%s\n%s", ca, cb)
	}
	sa, _ := a.Checksum()
	if !strings.HasPrefix(sa, "sha256:") || len(sa) != 71 {
		t.Fatalf("checksum %q", sa)
	}
	b.Routes[0].Mode = ModeEnforce
	sb, _ := b.Checksum()
	if sa == sb {
		t.Fatal("checksum did not change with the content")
	}
	// The canonical bytes decode back to an equal ruleset.
	back, err := Decode(ca)
	if err != nil {
		t.Fatal(err)
	}
	cc, _ := back.Canonical()
	if string(cc) != string(ca) {
		t.Fatal("canonical round trip differs")
	}
}

func TestEnvelope(t *testing.T) {
	r, _ := Decode([]byte(validJSON))
	e, err := NewEnvelope(7, r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsonMarshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEnvelope(b)
	if err != nil || got.Version != 7 {
		t.Fatalf("DecodeEnvelope: %v %+v", err, got)
	}
	bad := strings.Replace(string(b), e.Checksum, "sha256:00", 1)
	if _, err := DecodeEnvelope([]byte(bad)); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("wrong checksum accepted: %v", err)
	}
	other := strings.Replace(string(b), `"service":"checkout","version"`, `"service":"billing","version"`, 1)
	if _, err := DecodeEnvelope([]byte(other)); err == nil || !strings.Contains(err.Error(), "service") {
		t.Fatalf("service mismatch accepted: %v", err)
	}
}

func TestClassRank(t *testing.T) {
	for i, c := range Classes {
		if c.Rank() != i {
			t.Fatalf("%s rank %d", c, c.Rank())
		}
	}
	if Class("vip").Rank() != -1 {
		t.Fatal("unknown class ranked")
	}
}

// TestValidateRefusesADigitAlias: a digit (spaces around it allowed) is read
// as a priority level before any alias, so an alias "0" or " 7" was
// accepted and silently ignored ({"0": "core"} left 0 critical).
func TestValidateRefusesADigitAlias(t *testing.T) {
	for _, k := range []string{"0", " 7"} {
		_, err := Decode([]byte(`{"service":"a","priority":{"aliases":{"` + k + `":"core"}}}`))
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "priority.aliases."+k ||
			!strings.Contains(ve.Errors[0].Problem, "priority.levels") {
			t.Fatalf("alias %q: %v; want one error naming priority.aliases.%s and pointing to priority.levels", k, err, k)
		}
	}
	if _, err := Decode([]byte(`{"service":"a","priority":{"aliases":{"10":"core","checkout":"critical"}}}`)); err != nil {
		t.Fatalf("aliases that are not one digit: %v", err)
	}
}

func TestValidatePriorityTrustNamesTheField(t *testing.T) {
	long := strings.Repeat("p", MaxPeerLen+1)
	cases := []struct {
		json, field, problem string
	}{
		{`{"trust":{}}`, "priority.trust.max", "is required"},
		{`{"trust":{"max":"vip"}}`, "priority.trust.max", "must be one of"},
		{`{"trust":{"max":"core","peers":{"spiffe://a/b":"gold"}}}`, "priority.trust.peers.spiffe://a/b", "must be one of"},
		{`{"trust":{"max":"core","peers":{" a":"critical"}}}`, "priority.trust.peers. a", "without surrounding spaces"},
		{`{"trust":{"max":"core","peers":{"` + long + `":"critical"}}}`, "priority.trust.peers." + long, "1 to 2048"},
	}
	for _, c := range cases {
		_, err := Decode([]byte(`{"service":"a","priority":` + c.json + `}`))
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != c.field ||
			!strings.Contains(ve.Errors[0].Problem, c.problem) {
			t.Errorf("%s: %v; want one error on %s saying %q", c.json, err, c.field, c.problem)
		}
	}
	rs, err := Decode([]byte(`{"service":"a","priority":{"trust":{"max":"core","peers":{"spiffe://prod/checkout":"critical"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.Clone().Priority.Trust.Peers["spiffe://prod/checkout"]; got != ClassCritical {
		t.Fatalf("trust lost in a round trip: %q", got)
	}
}
