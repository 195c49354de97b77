package distribution

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"

	"github.com/nats-io/nats.go"
)

// maxBatch bounds the messages Run records together.
const maxBatch = 512

// maxBatchRetries bounds the times one batch is written again without a
// save that made its transaction fail.
const maxBatchRetries = 3

// recordBatch records messages that were waiting together, all bounded by
// one RecordTimeout. With a LedgerBatchStore it records them with one
// commit (group commit: a commit per message, an fsync each, held the
// ledger to about a thousand messages per second on a fast disk and a
// hundred on a slow one, fewer than a fleet of 10,000 instances sends):
//
//   - every instance is read once, and its messages are applied to its
//     record in the order they came, as one at a time would (each with its
//     own time, a transition where one changes the state);
//   - an instance's consecutive messages that change no state are written
//     as one save (the newest record), and each state change as a save
//     with its transition, all in one transaction;
//   - an instance another replica wrote meanwhile (ErrChanged), or whose
//     save made the transaction fail, has its remaining messages recorded
//     one at a time, as without a LedgerBatchStore (compare-and-set,
//     retries); the other instances are not held back by it.
func (l *Ledger) recordBatch(ctx context.Context, msgs []*nats.Msg) {
	bs, ok := l.o.Store.(LedgerBatchStore)
	if !ok || len(msgs) == 1 {
		for _, m := range msgs {
			l.record(ctx, m)
		}
		return
	}
	decoded := make([]message, 0, len(msgs))
	for _, m := range msgs {
		msg, err := l.decode(m)
		if err != nil {
			l.malformed(ctx, m, msg.kind, err)
			continue
		}
		decoded = append(decoded, msg)
	}
	if len(decoded) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, l.o.RecordTimeout)
	defer cancel()
	for _, msg := range decoded {
		l.lookUp(rctx, msg.service, msg.content)
	}
	l.mu.Lock()
	errs := l.recordTogether(rctx, bs, decoded)
	l.mu.Unlock()
	var failed int
	var first error
	for i, msg := range decoded {
		if errs[i] != nil {
			l.messages.WithLabelValues(msg.kind, "failed").Inc()
			failed++
			if first == nil {
				first = errs[i]
			}
			continue
		}
		l.messages.WithLabelValues(msg.kind, "recorded").Inc()
	}
	if failed > 0 {
		l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: messages not recorded", slog.Int("failed", failed),
			slog.Int("batch", len(decoded)), slog.Any("err", first))
	}
}

// batchSave is one save of a batch and the messages it records.
type batchSave struct {
	key  InstanceKey
	save InstanceSave
	msgs []int
}

// recordTogether records msgs (see recordBatch) and returns each one's
// error. The caller holds l.mu.
func (l *Ledger) recordTogether(ctx context.Context, bs LedgerBatchStore, msgs []message) []error {
	errs := make([]error, len(msgs))
	alone := make([]bool, len(msgs)) // recorded one at a time, after the batch
	byKey := map[InstanceKey][]int{}
	var keys []InstanceKey
	for i, msg := range msgs {
		k := InstanceKey{msg.service, msg.instance}
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	// Saves ordered by service and instance: two replicas' batches lock
	// the rows they update in one order, and cannot deadlock.
	slices.SortFunc(keys, func(a, b InstanceKey) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Instance, b.Instance))
	})
	recs, failedReads := l.readInstances(ctx, bs, keys)
	targets := map[string]Target{}
	var saves []batchSave
	for _, k := range keys {
		t, ok := targets[k.Service]
		if !ok {
			var err error
			if t, err = l.target(ctx, k.Service); err != nil {
				for _, i := range byKey[k] {
					alone[i] = true
				}
				continue
			}
			targets[k.Service] = t
		}
		if failedReads[k] {
			for _, i := range byKey[k] {
				alone[i] = true
			}
			continue
		}
		rec, known := recs[k]
		saves = l.applyInOrder(saves, k, rec, known, t, byKey[k], msgs)
	}
	live := saves
	for attempt := 0; len(live) > 0; attempt++ {
		batch := make([]InstanceSave, len(live))
		for j, s := range live {
			batch[j] = s.save
		}
		res, err := bs.SaveInstances(ctx, batch)
		if err == nil {
			stopped := map[InstanceKey]bool{}
			for j, s := range live {
				if res[j] == nil && !stopped[s.key] {
					if s.save.Transition != nil {
						l.moves.WithLabelValues(string(s.save.Transition.To)).Inc()
					}
					continue
				}
				if res[j] != nil && !stopped[s.key] && errors.Is(res[j], ErrChanged) {
					l.conflicts.Inc()
				}
				// The instance's remaining messages, one at a time, in order.
				stopped[s.key] = true
				for _, i := range s.msgs {
					alone[i] = true
				}
			}
			break
		}
		var se *SaveError
		if errors.As(err, &se) && se.Index >= 0 && se.Index < len(live) && attempt < maxBatchRetries && ctx.Err() == nil {
			// Without the save that failed and the instance's later ones.
			bad := live[se.Index].key
			kept := make([]batchSave, 0, len(live))
			for j, s := range live {
				if j >= se.Index && s.key == bad {
					for _, i := range s.msgs {
						alone[i] = true
					}
					continue
				}
				kept = append(kept, s)
			}
			live = kept
			continue
		}
		for _, s := range live {
			for _, i := range s.msgs {
				if ctx.Err() != nil {
					errs[i] = err // no time left to record them one at a time
				} else {
					alone[i] = true
				}
			}
		}
		break
	}
	for i, msg := range msgs {
		if alone[i] {
			errs[i] = l.updateInstance(ctx, msg.service, msg.instance, msg.change)
		}
	}
	for _, err := range errs {
		if err != nil {
			// A message lost: its instance may seem silent for a while.
			l.deaf = l.o.Clock.Now()
			break
		}
	}
	return errs
}

// readInstances reads the records of keys in one call, or one by one if
// that fails (one key the database refuses, say), and returns the keys it
// could not read.
func (l *Ledger) readInstances(ctx context.Context, bs LedgerBatchStore, keys []InstanceKey) (map[InstanceKey]Instance, map[InstanceKey]bool) {
	recs, err := bs.InstancesOf(ctx, keys)
	if err == nil {
		return recs, nil
	}
	recs, failed := map[InstanceKey]Instance{}, map[InstanceKey]bool{}
	for _, k := range keys {
		in, ok, err := bs.Instance(ctx, k.Service, k.Instance)
		switch {
		case err != nil:
			failed[k] = true
		case ok:
			recs[k] = in
		}
	}
	return recs, failed
}

// applyInOrder applies the messages of one instance (indexes into msgs, in
// the order they came) to its record as read (known false: unknown), each
// as updateInstance would, and appends the saves that write the outcome:
// one per state change, with its transition, and one for the messages
// after the last.
func (l *Ledger) applyInOrder(saves []batchSave, k InstanceKey, rec Instance, known bool, t Target, idx []int, msgs []message) []batchSave {
	open := -1 // the save taking further messages
	for _, i := range idx {
		now := l.o.Clock.Now()
		var in Instance
		if known {
			in = rec
			in.Labels = maps.Clone(rec.Labels)
		} else {
			in = Instance{Service: k.Service, Instance: k.Instance, Since: now}
		}
		msgs[i].change(&in, now)
		state, want, detail := l.eval.evaluate(&in, t, now, l.deaf)
		tr := move(&in, state, want, detail, now)
		if open < 0 {
			var prev *Instance
			if known {
				p := rec
				prev = &p
			}
			saves = append(saves, batchSave{key: k, save: InstanceSave{Prev: prev}})
			open = len(saves) - 1
		}
		s := &saves[open]
		s.save.In, s.save.Transition = in, tr
		s.msgs = append(s.msgs, i)
		if tr != nil {
			open = -1
		}
		rec, known = in, true
	}
	return saves
}
