package model_test

import (
	"testing"

	"governor.dev/governor/ui/model"
)

func TestUndeliverableString(t *testing.T) {
	tests := []struct {
		u    model.Undeliverable
		want string
	}{
		{model.Undeliverable{Version: 12, Reason: "too_large", Size: 1_200_000, Limit: 1_000_000}, "v12 cannot be delivered: 1.2 MB > 1.0 MB max payload"},
		{model.Undeliverable{Version: 3, Reason: "too_large", Size: 70_000, Limit: 65_536}, "v3 cannot be delivered: 70.0 kB > 65.5 kB max payload"},
		{model.Undeliverable{Version: 13, Reason: "too_large", Size: 1_048_700, Limit: 1_048_576}, "v13 cannot be delivered: 1048700 B > 1048576 B max payload"},
		{model.Undeliverable{Version: 4, Reason: "refused", Error: "permissions violation"}, "v4 cannot be delivered: permissions violation"},
		{model.Undeliverable{Version: 5}, "v5 cannot be delivered: the relay gave up on it"},
	}
	for _, tt := range tests {
		if got := tt.u.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.u, got, tt.want)
		}
	}
	for n, want := range map[int]string{512: "512 B", 999: "999 B", 1_000: "1.0 kB", 999_949: "999.9 kB", 999_950: "1.0 MB",
		999_999: "1.0 MB", 1_048_576: "1.0 MB"} {
		if got := model.Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
