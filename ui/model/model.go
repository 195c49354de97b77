package model

import (
	"context"
	"time"
)

// Rollout counts a service's instances by delivery state.
type Rollout struct {
	Synced  int `json:"synced"`
	Pending int `json:"pending"`
	Stale   int `json:"stale"`
	Nacked  int `json:"nacked"`
	Gone    int `json:"gone"`
	// Unpublished counts the instances no rule version is meant for (none
	// was published for the service, or only a canary that does not
	// select them): they run the SDK defaults, not approved rules, and are
	// never counted as Synced.
	Unpublished int `json:"unpublished"`
	// Unknown is set when the delivery ledger was not read for the service
	// (it failed, or none is configured): the counts are then zero and
	// mean nothing, and the UI shows "unknown", never "no instances". It
	// is a flag rather than a nil Rollout so that the JSON keeps its shape
	// ("unknown": true is added, absent when the counts are known).
	Unknown bool `json:"unknown,omitempty"`
}

// Total is the number of instances, 0 when unknown.
func (r Rollout) Total() int {
	if r.Unknown {
		return 0
	}
	return r.Synced + r.Pending + r.Stale + r.Nacked + r.Gone + r.Unpublished
}

// Point is one sample of a series.
type Point struct {
	At    time.Time `json:"at"`
	Value float64   `json:"value"`
}

// Term is one load score term's contribution.
type Term struct {
	Name         string  `json:"name"`
	Value        float64 `json:"value"`
	Weight       float64 `json:"weight"`
	Contribution float64 `json:"contribution"`
}

// ServiceStatus is the live state of one service. Pointers are nil when the
// value is unknown (no data): the UI shows "no data", never a made-up zero.
type ServiceStatus struct {
	Name string `json:"name"`
	// LoadScore is in [0, 1]; Trend its recent history, oldest first.
	LoadScore  *float64 `json:"load_score"`
	Overloaded bool     `json:"overloaded"`
	Trend      []Point  `json:"trend,omitempty"`
	Terms      []Term   `json:"terms,omitempty"`
	// RequestRate in requests per second, ErrorRatio and ShedRatio in [0, 1],
	// P99 in seconds.
	RequestRate *float64 `json:"request_rate"`
	ErrorRatio  *float64 `json:"error_ratio"`
	P99         *float64 `json:"p99_seconds"`
	// ShedByClass is the shed ratio per priority class.
	ShedByClass map[string]float64 `json:"shed_by_class,omitempty"`
	// RunningVersion is the version most instances run (0: unknown).
	RunningVersion int64   `json:"running_version"`
	Rollout        Rollout `json:"rollout"`
}

// Fleet is the live state of the services (the engine and the ledger).
type Fleet interface {
	Services(ctx context.Context) ([]ServiceStatus, error)
}

// Tier is an alert's severity: P0 pages at once, P1 pages in working hours,
// P2 is a ticket.
type Tier string

// Tiers, most severe first.
const (
	P0 Tier = "P0"
	P1 Tier = "P1"
	P2 Tier = "P2"
)

// Tiers lists the tiers, most severe first.
var Tiers = [...]Tier{P0, P1, P2}

// Alert is one alert, firing or resolved.
type Alert struct {
	ID       string    `json:"id"`
	Tier     Tier      `json:"tier"`
	Service  string    `json:"service"`
	Summary  string    `json:"summary"`
	Since    time.Time `json:"since"`
	Resolved time.Time `json:"resolved,omitzero"`
	AckedBy  string    `json:"acked_by,omitempty"`
	AckedAt  time.Time `json:"acked_at,omitzero"`
	// SilencedUntil is set while a silence covers the alert.
	SilencedUntil time.Time `json:"silenced_until,omitzero"`
}

// Silence mutes a service's alerts (all tiers if Tier is empty) until Until.
type Silence struct {
	Service string    `json:"service"`
	Tier    Tier      `json:"tier,omitempty"`
	Until   time.Time `json:"until"`
	By      string    `json:"by"`
	Comment string    `json:"comment"`
}

// Alerts is the alerting subsystem as the UI uses it.
type Alerts interface {
	// Firing returns the alerts firing now.
	Firing(ctx context.Context) ([]Alert, error)
	// History returns recent alerts, newest first, at most limit.
	History(ctx context.Context, limit int) ([]Alert, error)
	// Ack acknowledges a firing alert on behalf of by.
	Ack(ctx context.Context, id, by string) (Alert, error)
	// Silence mutes alerts.
	Silence(ctx context.Context, s Silence) error
}

// History is optionally implemented by a Fleet that keeps history: the
// service page then charts the chosen range instead of the recent trend.
type History interface {
	LoadScoreHistory(ctx context.Context, service string, span time.Duration) ([]Point, error)
}

// Instance is one SDK instance in the delivery ledger.
type Instance struct {
	Name    string    `json:"instance"`
	State   string    `json:"state"`
	Running int64     `json:"running"`
	Target  int64     `json:"target"`
	Since   time.Time `json:"since"`
	// LastSeen is the last heartbeat or report.
	LastSeen  time.Time `json:"last_seen"`
	NackError string    `json:"nack_error,omitempty"`
}

// Instances is optionally implemented by a Fleet that knows the delivery
// ledger: the service page then lists each instance.
type Instances interface {
	Instances(ctx context.Context, service string) ([]Instance, error)
}

// Chart is one series of a service over a range, with its unit.
type Chart struct {
	Title  string  `json:"title"`
	Unit   string  `json:"unit"`
	Points []Point `json:"points"`
	// Min and Max fix the value axis when both are not zero.
	Min float64 `json:"min,omitempty"`
	Max float64 `json:"max,omitempty"`
	// NoData says why Points is empty (the query failed, or the metric does
	// not exist for the service in the range).
	NoData string `json:"no_data,omitempty"`
	// Failed says why the query failed (the metrics source did not answer,
	// took too long or refused it): there is then nothing to draw, and the
	// page says the query failed rather than that there was no traffic.
	Failed string `json:"failed,omitempty"`
	// Partial is the metrics source's warning that its answer may lack
	// data (a store of a federated query that did not answer, a remote read
	// that failed), several joined by "; ": what is drawn may be
	// incomplete. Infos and PromQL annotations are not partial data.
	Partial string `json:"partial,omitempty"`
}

// Charts draws a service's signals over a range (the metrics source).
type Charts interface {
	Charts(ctx context.Context, service string, span time.Duration) ([]Chart, error)
}
