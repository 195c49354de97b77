package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// notSecret lists the receiver fields that carry no secret. A field added
// to a receiver (a header map, a bearer token, basic auth) fails this test
// until it is listed here or in secretFields, so a secret is never shown
// unmasked by default.
var notSecret = map[string][]string{
	"webhook":      {"max_alerts", "send_resolved"},
	"alertmanager": {"resend_interval", "send_resolved"},
	"pagerduty":    {"source", "events_per_minute", "send_resolved"},
	"slack":        {"channel", "send_resolved"},
	"email":        {"smarthost", "from", "to", "username", "allow_plaintext", "send_resolved"},
}

func TestEveryReceiverFieldIsClassifiedSecretOrNot(t *testing.T) {
	for f := range reflect.TypeFor[Receiver]().Fields() {
		kind, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if kind == "name" {
			continue
		}
		require.Contains(t, secretFields, kind, "receiver kind %s has no secret fields listed", kind)
		for cf := range f.Type.Elem().Fields() {
			name, _, _ := strings.Cut(cf.Tag.Get("json"), ",")
			secret, plain := slices.Contains(secretFields[kind], name), slices.Contains(notSecret[kind], name)
			require.True(t, secret != plain, "%s.%s: list it either as a secret or as not secret", kind, name)
			if secret {
				require.Equal(t, reflect.String, cf.Type.Kind(), "%s.%s: a secret is masked as a string", kind, name)
			}
		}
		for _, d := range destinationFields[kind] {
			require.True(t, slices.ContainsFunc(slices.Collect(f.Type.Elem().Fields()), func(cf reflect.StructField) bool {
				return strings.HasPrefix(cf.Tag.Get("json"), d+",") || cf.Tag.Get("json") == d
			}), "%s.%s: no such field", kind, d)
		}
	}
}
