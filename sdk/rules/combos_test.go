package rules

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
)

// TestValidateRefusesIgnoredCombinations: settings the enforcers would
// silently ignore are refused, each with an error naming the field.
func TestValidateRefusesIgnoredCombinations(t *testing.T) {
	const route = `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},%s}]}`
	const down = `{"service":"a","downstreams":[{"name":"d",%s}]}`
	tests := []struct {
		name, format, body, field, problem string
	}{
		{"shedding without concurrency", route, `"shedding":{"reserved":0.1}`, "routes[0].shedding", "needs concurrency"},
		{"empty shedding without concurrency", route, `"shedding":{}`, "routes[0].shedding", "needs concurrency"},
		{"queue without concurrency", route, `"queue":{"target":"5ms"}`, "routes[0].queue", "needs concurrency"},
		{"queue without concurrency in shadow", route, `"mode":"shadow","queue":{}`, "routes[0].queue", "needs concurrency"},
		{"warm-up with nothing to ramp", route, `"warm_up":{"period":"1m"}`, "routes[0].warm_up", "needs rate_limit"},
		{"rotate_every without consistent users", route, `"concurrency":{},"shedding":{"rotate_every":"1h"}`,
			"routes[0].shedding.rotate_every", "needs consistent_users"},
		{"caller header without callers", route, `"rate_limit":{"rate":1},"exempt":{"caller_header":"X-Who"}`,
			"routes[0].exempt.caller_header", "needs exempt.callers"},
		{"fixed with tolerance", route, `"concurrency":{"algorithm":"fixed","max":8,"tolerance":0.3}`,
			"routes[0].concurrency.tolerance", "fixed algorithm"},
		{"fixed with probe interval", route, `"concurrency":{"algorithm":"fixed","max":8,"probe_interval":"10s"}`,
			"routes[0].concurrency.probe_interval", "fixed algorithm"},
		{"k on a breaker", down, `"breaker":{"k":2}`, "downstreams[0].breaker.k", "only with kind throttle"},
		{"k on an explicit breaker", down, `"breaker":{"kind":"breaker","k":2}`, "downstreams[0].breaker.k", "only with kind throttle"},
		{"min_calls on a throttle", down, `"breaker":{"kind":"throttle","min_calls":5}`, "downstreams[0].breaker.min_calls", "kind throttle"},
		{"error_ratio on a throttle", down, `"breaker":{"kind":"throttle","error_ratio":0.5}`, "downstreams[0].breaker.error_ratio", "kind throttle"},
		{"slow_call_ratio on a throttle", down, `"breaker":{"kind":"throttle","slow_call_ratio":0.5}`, "downstreams[0].breaker.slow_call_ratio", "kind throttle"},
		{"slow_call on a throttle", down, `"breaker":{"kind":"throttle","slow_call":"1s"}`, "downstreams[0].breaker.slow_call", "kind throttle"},
		{"open_base on a throttle", down, `"breaker":{"kind":"throttle","open_base":"1s"}`, "downstreams[0].breaker.open_base", "kind throttle"},
		{"open_max on a throttle", down, `"breaker":{"kind":"throttle","open_max":"1m"}`, "downstreams[0].breaker.open_max", "kind throttle"},
		{"half_open_probes on a throttle", down, `"breaker":{"kind":"throttle","half_open_probes":2}`, "downstreams[0].breaker.half_open_probes", "kind throttle"},
		{"panic threshold without a breaker", down, `"balancer":{"panic_threshold":0.3}`,
			"downstreams[0].balancer.panic_threshold", "only with a breaker of kind breaker"},
		{"panic threshold with a throttle", down, `"breaker":{"kind":"throttle"},"balancer":{"panic_threshold":0.3}`,
			"downstreams[0].balancer.panic_threshold", "only with a breaker of kind breaker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(tt.format, "%s", tt.body, 1)
			_, err := Decode([]byte(data))
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%s) = %v, want a *ValidationError", data, err)
			}
			if len(ve.Errors) != 1 {
				t.Fatalf("want exactly one error, got %v", ve.Errors)
			}
			if fe := ve.Errors[0]; fe.Field != tt.field || !strings.HasPrefix(fe.Problem, tt.problem) && !strings.Contains(fe.Problem, tt.problem) {
				t.Fatalf("error %q, want field %q with %q", fe, tt.field, tt.problem)
			}
		})
	}
}

// TestValidateAcceptsDocumentedCombinations: the combinations with a
// documented meaning stay valid.
func TestValidateAcceptsDocumentedCombinations(t *testing.T) {
	tests := []struct{ name, json string }{
		{"queue on a shadow route", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"mode":"shadow","concurrency":{},"queue":{}}]}`},
		{"shedding and queue with concurrency", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"concurrency":{},"shedding":{"consistent_users":true,"rotate_every":"2h"},"queue":{}}]}`},
		{"warm-up of a key rate limit", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"key_rate_limits":[{"key":"ip","rate":5}],"warm_up":{"period":"1m"}}]}`},
		{"warm-up of a rate limit", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":5},"warm_up":{"period":"1m"}}]}`},
		{"warm-up of a concurrency limit", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"concurrency":{},"warm_up":{"period":"1m"}}]}`},
		{"caller header with callers", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"exempt":{"caller_header":"X-Who","callers":["probe"]}}]}`},
		{"fixed with initial and min", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"concurrency":{"algorithm":"fixed","initial":2,"min":1,"max":2}}]}`},
		{"slow_call with the slow ratio off", `{"service":"a","downstreams":[{"name":"d","breaker":{"slow_call":"300ms"}}]}`},
		{"panic mode off", `{"service":"a","downstreams":[{"name":"d","breaker":{},"balancer":{"panic_threshold":0}}]}`},
		{"panic threshold 1", `{"service":"a","downstreams":[{"name":"d","breaker":{"kind":"breaker"},"balancer":{"panic_threshold":1}}]}`},
		{"panic threshold", `{"service":"a","downstreams":[{"name":"d","breaker":{},"balancer":{"panic_threshold":0.25}}]}`},
		{"throttle with window and k", `{"service":"a","downstreams":[{"name":"d","breaker":{"kind":"throttle","window":"5s","k":1.5}}]}`},
		{"consistent users keyed by the application", `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"concurrency":{},"shedding":{"consistent_users":true}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode([]byte(tt.json)); err != nil {
				t.Fatalf("Decode: %v", err)
			}
		})
	}
}

// padded returns a valid ruleset for service whose canonical encoding is
// exactly n bytes (n must leave room for the ruleset's fixed part).
func padded(t testing.TB, service string, n int) *Ruleset {
	t.Helper()
	r := &Ruleset{Service: service, Routes: []Route{{Name: "r", Match: Match{PathPrefix: "/"},
		RateLimit: &RateLimit{Rate: 1}, Exempt: &Exempt{Paths: []string{"/"}}}}}
	b, err := r.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if n < len(b) {
		t.Fatalf("%d bytes is below the %d of the smallest padded ruleset", n, len(b))
	}
	r.Routes[0].Exempt.Paths[0] = "/" + strings.Repeat("x", n-len(b))
	if b, _ := r.Canonical(); len(b) != n {
		t.Fatalf("padded to %d bytes, want %d", len(b), n)
	}
	return r
}

// TestLimitsLeaveRoomForTheEnvelope: a ruleset of exactly MaxBytes decodes,
// one byte more does not; its envelope with the longest service name and
// the largest version stays within MaxEnvelopeBytes and decodes; every limit
// stays under the NATS default max_payload.
func TestLimitsLeaveRoomForTheEnvelope(t *testing.T) {
	service := strings.Repeat("s", MaxNameLen)
	r := padded(t, service, MaxBytes)
	b, _ := r.Canonical()
	if _, err := Decode(b); err != nil {
		t.Fatalf("a ruleset of MaxBytes (%d) is refused: %.200v", MaxBytes, err)
	}
	over := padded(t, service, MaxBytes+1)
	ob, _ := over.Canonical()
	if _, err := Decode(ob); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("a ruleset of MaxBytes+1 accepted or refused for another reason: %.200v", err)
	}

	e, err := NewEnvelope(math.MaxInt64, r)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if overhead := len(eb) - len(b); overhead > MaxEnvelopeOverhead || overhead > 300 {
		t.Fatalf("the envelope adds %d bytes, MaxEnvelopeOverhead is %d", overhead, MaxEnvelopeOverhead)
	}
	if len(eb) > MaxEnvelopeBytes {
		t.Fatalf("envelope %d bytes > MaxEnvelopeBytes %d", len(eb), MaxEnvelopeBytes)
	}
	got, err := DecodeEnvelope(eb)
	if err != nil || got.Version != math.MaxInt64 {
		t.Fatalf("the envelope of a MaxBytes ruleset does not decode: %.200v", err)
	}
	big := append(eb[:len(eb)-1:len(eb)-1], strings.Repeat(" ", MaxEnvelopeBytes-len(eb)+1)...)
	big = append(big, '}')
	if _, err := DecodeEnvelope(big); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("an envelope over MaxEnvelopeBytes accepted or refused for another reason: %.200v", err)
	}
	if MaxEnvelopeBytes+8<<10 > DefaultMaxPayload {
		t.Fatalf("MaxEnvelopeBytes %d leaves less than 8 KiB under the default max_payload %d", MaxEnvelopeBytes, DefaultMaxPayload)
	}
}

// TestCanonicalDoesNotModifyTheRuleset: sorting for the canonical encoding
// works on a copy, and an already sorted ruleset encodes the same.
func TestCanonicalDoesNotModifyTheRuleset(t *testing.T) {
	r := &Ruleset{Service: "a",
		Routes: []Route{
			{Name: "z", Match: Match{PathPrefix: "/z", Methods: []string{"POST", "GET"}}, Exempt: &Exempt{Paths: []string{"/b", "/a"}, Callers: []string{"y", "x"}}},
			{Name: "a", Match: Match{PathPrefix: "/a"}},
		},
		Downstreams: []Downstream{{Name: "q"}, {Name: "p"}},
	}
	before, _ := json.Marshal(r)
	c1, err := r.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := json.Marshal(r); string(after) != string(before) {
		t.Fatalf("Canonical modified the ruleset:\n%s\n%s", before, after)
	}
	back, err := Decode(c1)
	if err != nil {
		t.Fatal(err)
	}
	if !back.inOrder() {
		t.Fatal("the canonical encoding decodes out of order")
	}
	if back.sorted() != back {
		t.Fatal("a sorted ruleset was copied")
	}
	c2, _ := back.Canonical()
	if string(c1) != string(c2) {
		t.Fatalf("canonical differs:\n%s\n%s", c1, c2)
	}
	want := `{"service":"a","routes":[{"name":"a","match":{"path_prefix":"/a"}},{"name":"z","match":{"path_prefix":"/z","methods":["GET","POST"]},"exempt":{"paths":["/a","/b"],"callers":["x","y"]}}],"downstreams":[{"name":"p"},{"name":"q"}]}`
	if string(c1) != want {
		t.Fatalf("canonical\n%s\nwant\n%s", c1, want)
	}
}

func TestDurationDecoding(t *testing.T) {
	tests := []struct {
		in   string
		want Duration
		err  string
	}{
		{`"150ms"`, Duration(150e6), ""},
		{`" 2s "`, Duration(2e9), ""},
		{`"1\u0073"`, Duration(1e9), ""},
		{`"soon"`, 0, `cannot unmarshal "soon" into Go value of type rules.Duration`},
		{`"\u0073oon"`, 0, `cannot unmarshal "soon" into`},
		{`5`, 0, "cannot unmarshal number 5 into"},
		{`null`, 0, "cannot unmarshal null into"},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if tt.err == "" && (err != nil || d != tt.want) {
			t.Errorf("%s: %v %v, want %v", tt.in, d, err, tt.want)
		}
		if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: err %v, want %q", tt.in, err, tt.err)
		}
	}
}

// TestNameAndHeaderCharsets: the hand-written checks accept exactly what
// the documented patterns accept.
func TestNameAndHeaderCharsets(t *testing.T) {
	nameRE := regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/-]*$`)
	headerRE := regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_` + "`" + `|~-]+$`)
	var cases []string
	for c := 0; c < 256; c++ {
		cases = append(cases, string(rune(c)), "a"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a", "ab"+string([]byte{byte(c)}))
	}
	cases = append(cases, "", "checkout", "payments-db", "a.b_c:d/e-f", "-x", ".x", "X-Api-Key", "X Key", "é", "a\x00")
	for _, v := range cases {
		if got, want := validName(v), nameRE.MatchString(v); got != want {
			t.Errorf("validName(%q) = %v, the pattern says %v", v, got, want)
		}
		if got, want := validHeader(v), headerRE.MatchString(v); got != want {
			t.Errorf("validHeader(%q) = %v, the pattern says %v", v, got, want)
		}
	}
}
