package watch

import (
	"strings"
	"testing"
)

// A control plane reads the reports and heartbeats of an SDK newer than
// itself: fields added since are ignored, the known ones kept.
func TestReportsAndHeartbeatsWithFieldsAddedLaterAreRead(t *testing.T) {
	r, err := DecodeReport([]byte(`{"service":"s","instance":"i","version":3,"status":"ack","running":3,"added_later":{"x":[1,2]}}`))
	if err != nil || r.Service != "s" || r.Instance != "i" || r.Version != 3 || r.Status != StatusACK || r.Running != 3 {
		t.Fatalf("report with a field added later: %+v, %v", r, err)
	}
	h, err := DecodeHeartbeat([]byte(`{"service":"s","instance":"i","running":4,"added_later":"y"}`))
	if err != nil || h.Service != "s" || h.Running != 4 {
		t.Fatalf("heartbeat with a field added later: %+v, %v", h, err)
	}
}

// A canary record goes from the control plane to the SDKs: one with a
// field this SDK does not know may select instances in a way it cannot
// follow, so it is refused and the instance stays where it is.
func TestCanaryRecordWithAnUnknownFieldIsRefused(t *testing.T) {
	_, err := DecodeCanary([]byte(`{"selector":{"percent":10},"envelope":{},"added_later":true}`))
	if err == nil || !strings.Contains(err.Error(), `unknown field "added_later"`) {
		t.Fatalf("a canary record with an unknown field: %v, want it refused naming the field", err)
	}
}
