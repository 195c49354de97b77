package watch

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Reports name the content by checksum: the ACK the content applied, the
// NACK the content refused, both the content in force; so a ledger can tell
// an instance that still runs the old content of a republished version
// from one that runs the published content.
func TestReportsCarryTheChecksumOfTheContentRunningAndAnswered(t *testing.T) {
	old5, bad5 := contentEnvelope(t, 5, 50), contentEnvelope(t, 5, 52)
	s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
	s.onStable(mustJSON(t, old5))
	ack := lastReport(t, reports)
	if ack.Status != StatusACK || ack.Checksum != old5.Checksum || ack.RunningChecksum != old5.Checksum {
		t.Fatalf("ack %+v, want checksum and running checksum %s", ack, old5.Checksum)
	}
	if v, sum := s.runningContent(); v != 5 || sum != old5.Checksum {
		t.Fatalf("heartbeats say v%d %q, want v5 %s", v, sum, old5.Checksum)
	}
	app.refuseSum = map[string]bool{bad5.Checksum: true}
	s.onStable(mustJSON(t, bad5))
	nack := lastReport(t, reports)
	if nack.Status != StatusNACK || nack.Version != 5 || nack.Checksum != bad5.Checksum || nack.RunningChecksum != old5.Checksum {
		t.Fatalf("nack %+v, want the refused %s while running %s", nack, bad5.Checksum, old5.Checksum)
	}
	if v, _, _, sum := s.nackContent(); v != 5 || sum != bad5.Checksum {
		t.Fatalf("heartbeats repeat the NACK of v%d %q, want v5 %s", v, sum, bad5.Checksum)
	}
}

// The checksums are optional on the wire (older SDKs do not send them),
// decode and round-trip when present, and are bounded.
func TestDecodeReportAndHeartbeatWithChecksums(t *testing.T) {
	sum := contentEnvelope(t, 5, 50).Checksum
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := Report{Service: "s", Instance: "i", Version: 5, Status: StatusNACK, Reason: ReasonApply, Error: "x",
		Checksum: sum, Running: 5, RunningChecksum: sum, At: at}
	b, _ := json.Marshal(r)
	got, err := DecodeReport(b)
	if err != nil || got.Checksum != sum || got.RunningChecksum != sum {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	h := Heartbeat{Service: "s", Instance: "i", Running: 5, RunningChecksum: sum, NackVersion: 5, NackChecksum: sum, At: at}
	b, _ = json.Marshal(h)
	gh, err := DecodeHeartbeat(b)
	if err != nil || gh.RunningChecksum != sum || gh.NackChecksum != sum {
		t.Fatalf("decoded %+v, %v", gh, err)
	}
	old := []byte(`{"service":"s","instance":"i","version":3,"status":"ack","running":3}`)
	if got, err := DecodeReport(old); err != nil || got.Checksum != "" || got.RunningChecksum != "" {
		t.Fatalf("report without checksums: %+v, %v", got, err)
	}
	long := strings.Repeat("a", 1000)
	for _, data := range []string{
		`{"service":"s","instance":"i","version":3,"status":"ack","running":3,"checksum":"` + long + `"}`,
		`{"service":"s","instance":"i","version":3,"status":"ack","running":3,"running_checksum":"` + long + `"}`,
		`{"service":"s","instance":"i","version":3,"status":"ack","running":0,"running_checksum":"sha256:ab"}`,
	} {
		if _, err := DecodeReport([]byte(data)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("accepted %s: %v", data[:80], err)
		}
	}
	if _, err := DecodeHeartbeat([]byte(`{"service":"s","instance":"i","running":3,"running_checksum":"` + long + `"}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("accepted a heartbeat with a long running checksum: %v", err)
	}
}
