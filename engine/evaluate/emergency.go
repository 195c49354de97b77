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
}

// emergencies emits events.EmergencyPublish once per emergency version
// that went active: it remembers the last active version it saw of each
// service and looks at a service's active version only when that number
// changed. A version it first sees already active is announced only when
// it went active at or after e.since (this engine's start): an earlier one
// was announced by the engine that ran then, so a restart or a failover
// does not announce it again. Fetched versions are cached in e.active; the
// services whose active version could not be read are returned in failed.
func (e *Evaluator) emergencies(ctx context.Context, at time.Time, infos []versioning.ServiceInfo) (failed map[string]bool, errs []error) {
	failed = map[string]bool{}
	for _, in := range infos {
		if in.Active == 0 {
			continue
		}
		last, known := e.seen[in.Name]
		if known && last == in.Active {
			continue
		}
		v, ok := e.active[in.Name]
		if !ok || v.Number != in.Active {
			var err error
			if v, err = e.o.Versions.Get(ctx, in.Name, in.Active); err != nil {
				errs = append(errs, fmt.Errorf("evaluate: %s: active version v%d: %w", in.Name, in.Active, err))
				failed[in.Name] = true
				continue // looked at again next cycle
			}
			e.active[in.Name] = v
		}
		e.seen[in.Name] = v.Number
		if !v.Emergency || (!known && v.ActivatedAt.Before(e.since)) {
			continue
		}
		e.o.Events.Emit(ctx, events.Event{Kind: events.EmergencyPublish, Severity: events.Warning, At: at, Service: in.Name,
			Version: v.Number, Message: fmt.Sprintf("%s v%d was published in emergency mode by %s, skipping approval: %s", in.Name, v.Number, v.Author, v.Reason),
			Detail: Emergency{Version: v.Number, Author: v.Author, Reason: v.Reason, ActivatedAt: v.ActivatedAt, Parent: v.Parent}})
	}
	return failed, errs
}
