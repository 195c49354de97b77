package watch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// ErrMalformed is wrapped by every refused report, heartbeat or canary record.
var ErrMalformed = errors.New("watch: malformed message")

// MaxWireBytes bounds a report or heartbeat.
const MaxWireBytes = 64 << 10

// Bounds that keep every report and heartbeat of a watcher within
// MaxWireBytes: New refuses a longer service, instance or labels, and the
// error of a NACK is cut (a validation error lists every problem of a
// ruleset, which for a large one runs to hundreds of KiB).
const (
	maxNameBytes  = 256
	maxLabelBytes = 16 << 10
	maxErrorBytes = 4 << 10
	// maxChecksumBytes bounds a checksum ("sha256:" and 64 hex digits
	// today), leaving room for another algorithm.
	maxChecksumBytes = 128
)

// Status is the answer of an instance to a version: ACK or NACK.
type Status string

// Report statuses.
const (
	StatusACK  Status = "ack"
	StatusNACK Status = "nack"
)

// Reason classifies a NACK.
type Reason string

// NACK reasons; they are also the reason label of the rejected-messages metric.
const (
	ReasonNotJSON      Reason = "not_json"      // the payload is not JSON
	ReasonOversized    Reason = "oversized"     // the payload exceeds the size limit
	ReasonChecksum     Reason = "checksum"      // the checksum does not match the ruleset
	ReasonWrongService Reason = "wrong_service" // the version belongs to another service
	ReasonInvalid      Reason = "invalid"       // the envelope or ruleset fails validation
	ReasonApply        Reason = "apply"         // the SDK refused to apply the ruleset
)

// Report is an instance's ACK or NACK of one version, published on
// Names.ReportSubject.
type Report struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
	// Version answered; 0 when a refused payload did not say.
	Version int64  `json:"version"`
	Status  Status `json:"status"`
	// Checksum is the checksum of the content answered: the envelope
	// applied (ACK) or refused (NACK); empty when a refused payload did not
	// say, and in the reports of SDKs older than the field.
	Checksum string `json:"checksum,omitempty"`
	// Reason and Error explain a NACK; an Error above 4 KiB is cut.
	Reason Reason `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Running is the version the instance runs after this report, and
	// RunningChecksum the checksum of its content (empty when Running is
	// 0, and from older SDKs): a version published again with other
	// content (a restored rules store) runs under the same number, and
	// the checksum tells which content the instance runs.
	Running         int64             `json:"running"`
	RunningChecksum string            `json:"running_checksum,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	// At is when the instance sent it, on its clock, and never earlier
	// than its previous report or heartbeat (a wall clock stepped back
	// repeats the last At until it catches up).
	At time.Time `json:"at"`
}

// Heartbeat tells the control plane an instance is alive and which version it
// runs, published on Names.HeartbeatSubject every heartbeat interval.
type Heartbeat struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
	Running  int64  `json:"running"`
	// RunningChecksum is the checksum of the content running (as
	// Report.RunningChecksum).
	RunningChecksum string            `json:"running_checksum,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	// IntervalMS is the heartbeat period, so the control plane can tell a
	// silent instance from a slow one.
	IntervalMS int64 `json:"interval_ms"`
	// The last NACK, repeated so a ledger that missed the report (restarted,
	// disconnected) still learns it: version (0 if the payload did not say),
	// reason, error and the checksum of the refused content (as
	// Report.Checksum). Empty when the instance never refused a version, or
	// has applied one at least as new since (any version, after a NACK
	// without one).
	NackVersion  int64     `json:"nack_version,omitempty"`
	NackReason   Reason    `json:"nack_reason,omitempty"`
	NackError    string    `json:"nack_error,omitempty"`
	NackChecksum string    `json:"nack_checksum,omitempty"`
	At           time.Time `json:"at"`
}

// DecodeReport parses and checks a report.
func DecodeReport(data []byte) (*Report, error) {
	var r Report
	if err := decodeWire(data, &r); err != nil {
		return nil, err
	}
	var probs []string
	probs = required(probs, "service", r.Service)
	probs = required(probs, "instance", r.Instance)
	if r.Status != StatusACK && r.Status != StatusNACK {
		probs = append(probs, fmt.Sprintf("status: must be %q or %q, got %q", StatusACK, StatusNACK, r.Status))
	}
	if r.Version < 0 {
		probs = append(probs, fmt.Sprintf("version: must be 0 or above, got %d", r.Version))
	}
	if r.Status == StatusACK && r.Version == 0 {
		probs = append(probs, "version: an ack must name a version above 0")
	}
	if r.Running < 0 {
		probs = append(probs, fmt.Sprintf("running: must be 0 or above, got %d", r.Running))
	}
	probs = checksum(probs, "checksum", r.Checksum)
	probs = runningChecksum(probs, r.Running, r.RunningChecksum)
	return &r, malformed(probs)
}

// DecodeHeartbeat parses and checks a heartbeat.
func DecodeHeartbeat(data []byte) (*Heartbeat, error) {
	var h Heartbeat
	if err := decodeWire(data, &h); err != nil {
		return nil, err
	}
	var probs []string
	probs = required(probs, "service", h.Service)
	probs = required(probs, "instance", h.Instance)
	if h.Running < 0 {
		probs = append(probs, fmt.Sprintf("running: must be 0 or above, got %d", h.Running))
	}
	if h.IntervalMS < 0 {
		probs = append(probs, fmt.Sprintf("interval_ms: must be 0 or above, got %d", h.IntervalMS))
	}
	if h.NackVersion < 0 {
		probs = append(probs, fmt.Sprintf("nack_version: must be 0 or above, got %d", h.NackVersion))
	}
	probs = checksum(probs, "nack_checksum", h.NackChecksum)
	probs = runningChecksum(probs, h.Running, h.RunningChecksum)
	return &h, malformed(probs)
}

// checksum bounds an optional checksum field.
func checksum(probs []string, field, v string) []string {
	if len(v) > maxChecksumBytes {
		return append(probs, fmt.Sprintf("%s: is %d bytes, at most %d allowed", field, len(v), maxChecksumBytes))
	}
	return probs
}

// runningChecksum checks the checksum of the content running: bounded, and
// only with a version running.
func runningChecksum(probs []string, running int64, v string) []string {
	if v != "" && running == 0 {
		return append(probs, "running_checksum: must be empty when running is 0")
	}
	return checksum(probs, "running_checksum", v)
}

func required(probs []string, field, v string) []string {
	switch {
	case v == "":
		return append(probs, field+": is required")
	case len(v) > maxNameBytes:
		return append(probs, fmt.Sprintf("%s: is %d bytes, at most %d allowed", field, len(v), maxNameBytes))
	}
	return probs
}

// cutError shortens the error of a NACK to at most maxErrorBytes, at a
// UTF-8 boundary, and says how much it left out.
func cutError(msg string) string {
	if len(msg) <= maxErrorBytes {
		return msg
	}
	cut := maxErrorBytes - len(" ... (1234567890 more bytes)")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s ... (%d more bytes)", msg[:cut], len(msg)-cut)
}

func malformed(probs []string) error {
	if len(probs) == 0 {
		return nil
	}
	msg := probs[0]
	for _, p := range probs[1:] {
		msg += "; " + p
	}
	return fmt.Errorf("%w: %s", ErrMalformed, msg)
}

// decodeWire decodes one JSON object and ignores fields it does not know:
// the reports and heartbeats of an SDK newer than the control plane carry
// fields added since, which must not make the control plane drop them (see
// "Upgrade order" in the package documentation).
func decodeWire(data []byte, v any) error {
	if len(data) > MaxWireBytes {
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrMalformed, len(data), MaxWireBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: unexpected data after the JSON object", ErrMalformed)
	}
	return nil
}
