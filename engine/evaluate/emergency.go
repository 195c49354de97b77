package evaluate

import (
	"context"
	"fmt"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
)

// Emergency is the Detail of an events.EmergencyPublish event.
type Emergency struct {
	Version     int64     `json:"version"`
	Author      string    `json:"author"`
	Reason      string    `json:"reason"`
	ActivatedAt time.Time `json:"activated_at"`
	// Parent is the version that was active before it (0: none).
	Parent int64 `json:"parent,omitempty"`
	// AuditSeq is the sequence number of its audit entry.
	AuditSeq int64 `json:"audit_seq"`
	// Key identifies the publication (EmergencyKey): a report made again
	// after a crash, or by two replicas during a leader change, carries
	// the same key.
	Key string `json:"key"`
}

// EmergencyKey is the deterministic key of the report of the emergency
// publication of service's version n recorded at audit sequence seq.
func EmergencyKey(service string, n, seq int64) string {
	return fmt.Sprintf("emergency_publish/%s/v%d/audit-%d", service, n, seq)
}

// emergencyPage bounds the audit entries one cycle reports.
const emergencyPage = 200

// emergencies emits events.EmergencyPublish for every emergency
// publication, read from the audit log (ActionEmergency entries) between
// the watermark (Options.Watermark) and the log's head, whether the
// version is still active or was superseded since, and whether or not an
// engine was leading when it happened. It fetches the versions, emits,
// and only then moves the watermark past them with a compare-and-set:
// at least once. A crash (or a failed move) between the emit and the move
// loses nothing: the next cycle, here or on a new leader, reports the same
// publications again, with the same Emergency.Key (EmergencyKey), so a
// duplicate is recognised downstream; the alerts manager keeps one alert
// per service for them (rule GovernorEmergencyPublish), so a duplicate
// refreshes it rather than raising another. Two replicas evaluating side
// by side during a leader change may both report the same entries, keyed
// alike; only one of them moves the mark.
//
// The first time (the mark never set) only publications at or after
// e.since are reported: the history before this engine's first start is
// not news. A version that cannot be read stops the cycle's scan there; it
// is reported on a later cycle. The returned map is kept for the caller's
// signature and always empty: reading the audit log fails no service.
func (e *Evaluator) emergencies(ctx context.Context, at time.Time, _ []versioning.ServiceInfo) (failed map[string]bool, errs []error) {
	failed = map[string]bool{}
	audit := e.o.Audit
	if audit == nil {
		var ok bool
		if audit, ok = e.o.Versions.(versioning.Auditor); !ok {
			return failed, nil
		}
	}
	if e.o.Watermark == nil {
		e.o.Watermark = &MemWatermark{}
	}
	mark := e.o.Watermark
	seq, set, err := mark.Load(ctx)
	if err != nil {
		return failed, []error{err}
	}
	// The audit log's head first: appends are serialized, so every entry
	// up to it is committed, and the mark can move past the entries that
	// are not emergencies (the next scan starts there, not at the last
	// emergency).
	head, err := audit.Audit(ctx, versioning.AuditFilter{Newest: true, Limit: 1})
	if err != nil {
		return failed, []error{fmt.Errorf("evaluate: emergency publications: %w", err)}
	}
	to := seq
	if len(head) > 0 && head[0].Seq > seq {
		to = head[0].Seq
	}
	var entries []versioning.AuditEntry
	if to > seq {
		entries, err = audit.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionEmergency, AfterSeq: seq, BeforeSeq: to + 1, Limit: emergencyPage})
		if err != nil {
			return failed, []error{fmt.Errorf("evaluate: emergency publications: %w", err)}
		}
		if len(entries) == emergencyPage {
			to = entries[len(entries)-1].Seq // the rest on the next cycle
		}
	}
	type report struct {
		entry versioning.AuditEntry
		v     versioning.Version
	}
	var reports []report
	for _, en := range entries {
		if !set && en.At.Before(e.since) {
			continue
		}
		v, err := e.o.Versions.Get(ctx, en.Service, en.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("evaluate: %s: emergency version v%d: %w", en.Service, en.Version, err))
			to = en.Seq - 1 // reported on a later cycle
			break
		}
		reports = append(reports, report{en, v})
	}
	if set && to == seq {
		return failed, errs
	}
	for _, r := range reports {
		v := r.v
		e.o.Events.Emit(ctx, events.Event{Kind: events.EmergencyPublish, Severity: events.Warning, At: at, Service: v.Service,
			Version: v.Number, Message: fmt.Sprintf("%s v%d was published in emergency mode by %s, skipping approval: %s", v.Service, v.Number, v.Author, v.Reason),
			Detail: Emergency{Version: v.Number, Author: v.Author, Reason: v.Reason, ActivatedAt: v.ActivatedAt, Parent: v.Parent,
				AuditSeq: r.entry.Seq, Key: EmergencyKey(v.Service, v.Number, r.entry.Seq)}})
	}
	// Once reported, record it even if the cycle is being cancelled (the
	// process stopping): a report the mark misses is made again.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := mark.Advance(actx, set, seq, to); err != nil {
		// Reported, not recorded: the next cycle reports them again
		// under the same keys.
		return failed, append(errs, err)
	}
	return failed, errs
}
