package versioning_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

func TestYAMLRoundTrip(t *testing.T) {
	r := base()
	r.Priority = &rules.Priority{Levels: map[string]rules.Class{"0": rules.ClassCritical}, Default: rules.ClassBrowse}
	lifo := false
	r.Routes[0].Queue = &rules.Queue{Target: rules.Duration(5e6), LIFO: &lifo}
	for i := range r.Routes { // shedding and the queue work on a concurrency limit
		r.Routes[i].Concurrency = &rules.Concurrency{}
	}
	r.Downstreams[0].Retry = &rules.Retry{MaxAttempts: 3, Budget: 0.2}
	out, err := versioning.EncodeYAML(r)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), "service: checkout\n"), "keeps the schema's field order:\n%s", out)
	require.Contains(t, string(out), "target: 5ms")
	back, err := versioning.DecodeRuleset(versioning.FormatYAML, out)
	require.NoError(t, err)
	want, _ := r.Checksum()
	got, _ := back.Checksum()
	require.Equal(t, want, got)
}

func TestDecodeRulesetYAML(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		fields []string
		check  func(t *testing.T, r *rules.Ruleset)
	}{
		{"valid with comments and integer keys", `
# exported
service: checkout
priority:
  levels: {0: critical, 9: batch}
routes:
  - name: pay
    match: {path_prefix: /pay}
    rate_limit: {rate: 1e2, burst: 0x10}
`, nil, func(t *testing.T, r *rules.Ruleset) {
			require.Equal(t, 100.0, r.Routes[0].RateLimit.Rate)
			require.Equal(t, 16, r.Routes[0].RateLimit.Burst)
			require.Equal(t, rules.ClassBatch, r.Priority.Levels["9"])
		}},
		{"empty", "", []string{"ruleset"}, nil},
		{"two documents", "service: a\n---\nservice: b\n", []string{"ruleset"}, nil},
		{"alias", "service: &s a\nroutes:\n  - name: *s\n    match: {path_prefix: /}\n", []string{"ruleset.routes[0].name"}, nil},
		{"merge key", "service: a\ndownstreams:\n  - <<: {name: x}\n", []string{"ruleset.downstreams[0]"}, nil},
		{"duplicate key", "service: a\nservice: b\n", []string{"ruleset.service"}, nil},
		{"non-string key", "service: a\n? [1, 2]\n: x\n", []string{"ruleset"}, nil},
		{"infinite number", "service: a\nroutes:\n  - name: r\n    match: {path_prefix: /}\n    rate_limit: {rate: .inf}\n", []string{"ruleset.routes[0].rate_limit.rate"}, nil},
		{"string for number", "service: a\nroutes:\n  - name: r\n    match: {path_prefix: /}\n    rate_limit: {rate: fast}\n", []string{"ruleset.routes.rate_limit.rate"}, nil},
		{"unknown field", "service: a\nroutez: []\n", []string{"ruleset.routez"}, nil},
		{"invalid value", "service: a\nroutes:\n  - name: r\n    match: {path_prefix: nope}\n", []string{"ruleset.routes[0].match.path_prefix"}, nil},
		{"too deep", "service: a\nx: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", []string{"ruleset.x" + strings.Repeat("[0]", 31)}, nil},
		{"oversized", "service: a\n#" + strings.Repeat("x", rules.MaxBytes) + "\n", []string{"ruleset"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := versioning.DecodeRuleset(versioning.FormatYAML, []byte(tt.in))
			if tt.fields == nil {
				require.NoError(t, err)
				tt.check(t, r)
				return
			}
			require.Nil(t, r)
			require.ErrorIs(t, err, versioning.ErrInvalid)
			var ie *versioning.InputError
			require.True(t, errors.As(err, &ie), "%v", err)
			got := make([]string, len(ie.Errors))
			for i, fe := range ie.Errors {
				got[i] = fe.Field
			}
			require.Equal(t, tt.fields, got, "%v", err)
		})
	}
}

// FuzzDecodeRulesetYAML: untrusted YAML never panics; whatever is accepted
// is a valid ruleset that survives export and import unchanged.
func FuzzDecodeRulesetYAML(f *testing.F) {
	seeds := []string{
		"service: a\n",
		"service: checkout\nroutes:\n  - name: pay\n    match: {path_prefix: /pay, methods: [POST]}\n    rate_limit: {rate: 10, burst: 5}\n",
		"service: a\ndownstreams:\n  - name: db\n    timeout: 150ms\n    breaker: {window: 10s, error_ratio: 0.5}\n",
		"service: a\npriority: {levels: {0: critical}, aliases: {vip: critical}}\n",
		"service: &a x\nroutes: *a\n",
		"[1, 2, 3]",
		"service: a\n---\n",
		"? {a: 1}\n: b\n",
		"service: !!binary aGVsbG8=\n",
		"service: 'a'\nroutes: [{name: r, match: {path_prefix: /}, warm_up: {period: 1m}}]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := versioning.DecodeRuleset(versioning.FormatYAML, data)
		if err != nil {
			require.ErrorIs(t, err, versioning.ErrInvalid)
			return
		}
		require.NoError(t, r.Validate())
		out, err := versioning.EncodeYAML(r)
		require.NoError(t, err)
		back, err := versioning.DecodeRuleset(versioning.FormatYAML, out)
		require.NoError(t, err, "export of an accepted ruleset must import:\n%s", out)
		s1, _ := r.Checksum()
		s2, _ := back.Checksum()
		require.Equal(t, s1, s2)
	})
}

// FuzzDecodeRulesetJSON: untrusted JSON never panics and errors are field
// errors.
func FuzzDecodeRulesetJSON(f *testing.F) {
	for _, s := range []string{`{"service":"a"}`, `{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"}}]}`,
		`{"service":1}`, `{`, `{"service":"a"} x`, `{"service":"a","x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := versioning.DecodeRuleset(versioning.FormatJSON, data)
		if err != nil {
			var ie *versioning.InputError
			require.ErrorAs(t, err, &ie)
			require.NotEmpty(t, ie.Errors)
			return
		}
		require.NoError(t, r.Validate())
	})
}
