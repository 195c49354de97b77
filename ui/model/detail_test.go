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
		{model.Undeliverable{Version: 4, Reason: "refused", Error: "permissions violation"}, "v4 cannot be delivered: permissions violation"},
		{model.Undeliverable{Version: 5}, "v5 cannot be delivered: the relay gave up on it"},
	}
	for _, tt := range tests {
		if got := tt.u.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.u, got, tt.want)
		}
	}
	if got := model.Bytes(512); got != "512 B" {
		t.Errorf("Bytes(512) = %q", got)
	}
}
