package watch

import (
	"errors"
	"regexp"
	"testing"
)

func TestServiceTokenIsAValidKeyAndOneToOne(t *testing.T) {
	valid := regexp.MustCompile(`^[-_=a-zA-Z0-9]+$`)
	seen := map[string]string{}
	for _, s := range []string{"checkout", "checkout.v2", "checkout_v2", "checkout-v2", "a/b", "a:b", "a=b", "a=3Db", "x.y.z"} {
		tok := ServiceToken(s)
		if !valid.MatchString(tok) {
			t.Fatalf("token %q of %q is not a valid KV key token", tok, s)
		}
		if prev, ok := seen[tok]; ok {
			t.Fatalf("%q and %q map to the same token %q", prev, s, tok)
		}
		seen[tok] = s
	}
}

func TestNames(t *testing.T) {
	n, err := NewNames("t_1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ got, want string }{
		{n.Bucket(), "t_1_rules"},
		{n.StableKey("checkout.v2"), "checkout=2Ev2.stable"},
		{n.ServiceKeys("checkout"), "checkout.*"},
		{n.CanaryKey("checkout"), "checkout.canary"},
		{n.ReportSubject("checkout"), "t_1.rules.report.checkout"},
		{n.HeartbeatSubject("checkout"), "t_1.rules.heartbeat.checkout"},
		{n.ReportWildcard(), "t_1.rules.report.*"},
		{(Names{}).Bucket(), "governor_rules"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	for _, bad := range []string{"a.b", "a b", "ü", "*", ">"} {
		if _, err := NewNames(bad); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("NewNames(%q) = %v, want ErrInvalidOption", bad, err)
		}
	}
}
