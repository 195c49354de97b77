package distribution

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// reevaluate re-evaluates every instance of the target's service (see
// reevaluation).
func (l *Ledger) reevaluate(ctx context.Context, t Target) error {
	ins, err := l.o.Store.Instances(ctx, t.Service)
	if err != nil {
		return fmt.Errorf("distribution: ledger instances: %w", err)
	}
	r := l.newReevaluation(l.o.Clock.Now(), len(ins))
	for _, in := range ins {
		if err := r.add(ctx, in, t); err != nil {
			return err
		}
	}
	return r.flush(ctx)
}

// reevaluateInstance evaluates an instance as read against t and writes it
// if its state or target moved. If another replica changed the record
// meanwhile, it is read again and evaluated anew. refused says that a
// write over the record as read was already refused (a batch's save): it
// is read again first, and that write counts as the first attempt.
func (l *Ledger) reevaluateInstance(ctx context.Context, in Instance, t Target, now time.Time, refused bool) (state State, err error) {
	first := 1
	if refused {
		first = 2
	}
	err = l.compareAndSetFrom(first, func() error {
		if refused {
			cur, ok, err := l.o.Store.Instance(ctx, in.Service, in.Instance)
			if err != nil {
				return fmt.Errorf("distribution: ledger instance: %w", err)
			}
			if !ok {
				return nil
			}
			in = cur
		}
		refused = true
		prev := in
		state, err = l.saveAgainst(ctx, &prev, in, t, now, false)
		return err
	})
	return state, err
}

// reevaluation re-evaluates instances as read at one time, as a
// publication and a sweep do, and writes those whose state or target
// moved; the others are not written. On a LedgerBatchStore it writes them
// l.saveBatch at a time, each batch in one transaction: a commit per
// instance held the ledger's lock, and so its message loop, for seconds in
// a fleet of thousands, and took a slow disk past SweepTimeout with the
// publication half applied. Otherwise it writes them one at a time
// (reevaluateInstance). What it records is what writing each one alone
// records: the same records, transitions, times and metrics. A save the
// batch's compare-and-set refuses (another replica wrote the instance
// meanwhile) is counted as a conflict, and its instance read again and
// written alone; a batch whose transaction fails (a record the database
// refuses, a failed commit) is written again one instance at a time, which
// writes what one at a time would have written and fails where it would
// have failed. The caller holds l.mu.
type reevaluation struct {
	l   *Ledger
	bs  LedgerBatchStore // nil: one at a time
	now time.Time
	// states holds the state of each instance added, in the order added.
	states  []State
	pending []pendingSave
}

// pendingSave is an instance's save waiting for its batch; its Prev is
// the record as read.
type pendingSave struct {
	t    Target
	save InstanceSave
	slot int // in reevaluation.states
}

// newReevaluation returns a reevaluation at now of about n instances.
func (l *Ledger) newReevaluation(now time.Time, n int) *reevaluation {
	r := &reevaluation{l: l, now: now, states: make([]State, 0, n)}
	if bs, ok := l.o.Store.(LedgerBatchStore); ok && l.saveBatch > 0 {
		r.bs = bs
		r.pending = make([]pendingSave, 0, min(n, l.saveBatch))
	}
	return r
}

// add re-evaluates in, as read, against t: it writes it now (one at a
// time), leaves it unwritten (nothing moved) or adds it to the batch,
// written when full.
func (r *reevaluation) add(ctx context.Context, in Instance, t Target) error {
	if r.bs == nil {
		state, err := r.l.reevaluateInstance(ctx, in, t, r.now, false)
		r.states = append(r.states, state)
		return err
	}
	state, want, detail := r.l.eval.evaluate(&in, t, r.now, r.l.deaf)
	r.states = append(r.states, state)
	if state == in.State && want == in.Target {
		return nil
	}
	prev := in
	tr := move(&in, state, want, detail, r.now)
	r.pending = append(r.pending, pendingSave{t: t, slot: len(r.states) - 1,
		save: InstanceSave{Prev: &prev, In: in, Transition: tr}})
	if len(r.pending) < r.l.saveBatch {
		return nil
	}
	return r.flush(ctx)
}

// flush writes the batch waiting, if any.
func (r *reevaluation) flush(ctx context.Context) error {
	batch := r.pending
	if len(batch) == 0 {
		return nil
	}
	defer func() {
		clear(batch)
		r.pending = batch[:0]
	}()
	// Saves ordered by service and instance in byte order, as recordBatch
	// orders its own (the store's Instances follows the database's
	// collation, which may not): two replicas' batches lock the rows they
	// update in one order, and cannot deadlock.
	slices.SortFunc(batch, func(a, b pendingSave) int {
		return cmp.Or(cmp.Compare(a.save.In.Service, b.save.In.Service), cmp.Compare(a.save.In.Instance, b.save.In.Instance))
	})
	saves := make([]InstanceSave, len(batch))
	for j, p := range batch {
		saves[j] = p.save
	}
	errs, err := r.bs.SaveInstances(ctx, saves)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("distribution: ledger save %d instances: %w", len(batch), err)
		}
		for _, p := range batch {
			state, err := r.l.reevaluateInstance(ctx, *p.save.Prev, p.t, r.now, false)
			r.states[p.slot] = state
			if err != nil {
				return err
			}
		}
		return nil
	}
	for j, p := range batch {
		switch {
		case errs[j] == nil:
			if tr := p.save.Transition; tr != nil {
				r.l.moves.WithLabelValues(string(tr.To)).Inc()
			}
		case errors.Is(errs[j], ErrChanged):
			r.l.conflicts.Inc()
			state, err := r.l.reevaluateInstance(ctx, *p.save.Prev, p.t, r.now, true)
			r.states[p.slot] = state
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("distribution: ledger save %s/%s: %w", p.save.In.Service, p.save.In.Instance, errs[j])
		}
	}
	return nil
}
