package dispatch

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// GroupState is what a group has notified: the persisted notification log
// entry of one (receiver, group).
type GroupState struct {
	Receiver string        `json:"receiver"`
	Key      string        `json:"key"`
	Labels   alerts.Labels `json:"labels"`
	// Notified holds the firing alerts already announced, by fingerprint;
	// each gets its end time when it stops firing, leaves when its resolve
	// is sent, and comes back, with its end time, when that resolve was
	// never delivered (Undo).
	Notified map[string]alerts.Alert `json:"notified"`
	// Withheld names the notified alerts that the last notification left
	// out because they were muted or acknowledged. Such an alert counts as
	// new once it is no longer quiet, so it is sent at the group interval,
	// not at the repeat interval: Alertmanager's notification log holds the
	// alerts of the last notification only.
	Withheld map[string]bool `json:"withheld,omitempty"`
	// SentAt is the time of the last notification, Seq its number.
	SentAt time.Time `json:"sent_at"`
	Seq    int64     `json:"seq"`
}

func (g GroupState) clone() GroupState {
	g.Notified = maps.Clone(g.Notified)
	if g.Notified == nil {
		g.Notified = map[string]alerts.Alert{}
	}
	g.Withheld = maps.Clone(g.Withheld)
	return g
}

// Notification is a message to enqueue and the group state to persist with
// it, atomically.
type Notification struct {
	Message *notify.Message
	State   GroupState
}

// Filter tells the dispatcher which alerts are muted (silence, inhibition)
// or acknowledged; nil functions mute nothing. Both receive the alert's
// fingerprint, computed once per flush.
type Filter struct {
	Muted        func(fp alerts.Fingerprint, a alerts.Alert) bool
	Acknowledged func(fp alerts.Fingerprint, a alerts.Alert) bool
}

// quiet reports whether a firing alert is muted or acknowledged.
func (f Filter) quiet(fp alerts.Fingerprint, a alerts.Alert) bool {
	return (f.Muted != nil && f.Muted(fp, a)) || (f.Acknowledged != nil && f.Acknowledged(fp, a))
}

// routed is an alert with its fingerprint, in one group.
type routed struct {
	a  alerts.Alert
	fp alerts.Fingerprint
	// route is the index of the route that put it in the group, whose
	// group_by names the group's labels (groupLabels).
	route int
}

// groupLabels returns the labels of the group r is in.
func (d *Dispatcher) groupLabels(r routed) alerts.Labels {
	if d.keyNames[r.route] == nil { // group_by ["..."]
		return r.a.Labels.Merge(nil)
	}
	return r.a.Labels.Subset(d.routes[r.route].groupBy())
}

type group struct {
	state     GroupState
	firstSeen time.Time
	// undone: Undo took back the group's last notification, so the next
	// one waits for the group interval even with nothing notified, as
	// Alertmanager retries at the next flush of the group.
	undone bool
}

// GroupRef names a group: its receiver and key.
type GroupRef struct {
	Receiver string `json:"receiver"`
	Key      string `json:"key"`
}

// compare orders groups by receiver, then key: the order of the
// notifications of a flush and of the messages of an acknowledgement.
func (r GroupRef) compare(o GroupRef) int {
	if c := strings.Compare(r.Receiver, o.Receiver); c != 0 {
		return c
	}
	return strings.Compare(r.Key, o.Key)
}

// Dispatcher groups and times notifications. It is safe for concurrent use.
type Dispatcher struct {
	routes []Route
	timing Timing

	// keyNames holds, for each route, its group_by names sorted without
	// repeats: the names of the group key, in the order Labels.String
	// writes them; nil for a route grouping by every label (GroupByAll).
	keyNames [][]string

	mu     sync.Mutex
	groups map[GroupRef]*group
	// order holds the groups' refs, sorted up to sortedLen, then those added
	// since; it may still hold refs of groups dropped since (stale counts
	// the drops) and, for a group dropped and formed again, a ref twice.
	// ordered tidies it when anything changed, so that a step in a storm
	// sorts only the groups it formed, and an acknowledgement none.
	order     []GroupRef
	sortedLen int
	stale     int
	// changed and forgotten hold the groups whose state a regroup changed
	// without a notification, and those dropped, since the last
	// TakeChanges.
	changed, forgotten map[GroupRef]bool
}

// New validates routes (ValidateRoutes: one must catch every alert) and
// timing (zero timing fields take defaults).
func New(routes []Route, timing Timing) (*Dispatcher, error) {
	if err := ValidateRoutes(routes); err != nil {
		return nil, err
	}
	timing = timing.WithDefaults()
	if err := timing.Validate(); err != nil {
		return nil, err
	}
	// Loaded once: a flush reads the business hours of every P2 group.
	timing.BusinessHours.loc = timing.BusinessHours.location()
	keyNames := make([][]string, len(routes))
	for i, r := range routes {
		if !r.groupsByAll() {
			keyNames[i] = slices.Compact(slices.Sorted(slices.Values(r.groupBy())))
		}
	}
	return &Dispatcher{routes: routes, timing: timing, keyNames: keyNames, groups: map[GroupRef]*group{},
		changed: map[GroupRef]bool{}, forgotten: map[GroupRef]bool{}}, nil
}

// add holds a new group; d.mu held.
func (d *Dispatcher) add(ref GroupRef, g *group) {
	d.groups[ref] = g
	d.order = append(d.order, ref)
}

// ordered returns the refs of the groups held, sorted (GroupRef.compare).
// The caller must not keep the slice past a change of the groups; d.mu
// held.
func (d *Dispatcher) ordered() []GroupRef {
	if d.sortedLen == len(d.order) && d.stale == 0 {
		return d.order
	}
	if d.sortedLen < len(d.order) {
		added := d.order[d.sortedLen:]
		slices.SortFunc(added, GroupRef.compare)
		merged := make([]GroupRef, 0, len(d.order))
		old := d.order[:d.sortedLen]
		for len(old) > 0 && len(added) > 0 {
			if old[0].compare(added[0]) <= 0 {
				merged, old = append(merged, old[0]), old[1:]
			} else {
				merged, added = append(merged, added[0]), added[1:]
			}
		}
		d.order = append(append(merged, old...), added...)
	}
	// Drop the refs of groups dropped since, and the second ref of a group
	// formed again.
	out := d.order[:0]
	for _, r := range d.order {
		if d.groups[r] != nil && (len(out) == 0 || out[len(out)-1] != r) {
			out = append(out, r)
		}
	}
	clear(d.order[len(out):])
	d.order, d.sortedLen, d.stale = out, len(out), 0
	return d.order
}

// Timing returns the timing in force, defaults filled in.
func (d *Dispatcher) Timing() Timing {
	t := d.timing
	t.Repeat = maps.Clone(t.Repeat)
	return t
}

// Receivers returns the receivers named by the routes.
func (d *Dispatcher) Receivers() []string {
	var out []string
	for _, r := range d.routes {
		if !slices.Contains(out, r.Receiver) {
			out = append(out, r.Receiver)
		}
	}
	return out
}

// Restore loads persisted group states. States of receivers no route names
// any more are dropped and reported by TakeChanges as forgotten, so that
// the caller removes their stored rows: a receiver added back later starts
// afresh, without resolves for what it was told before its removal. A
// notified alert that the routes now put in another
// group of the same receiver (its group_by changed) moves there with the
// time of its last notification, as Alertmanager keeps alerts firing across
// a reload: it is not reported resolved because its grouping changed, nor
// announced again before the group's repeat interval, and its resolve, when
// it comes, is sent by the new group. The groups a move changed or emptied
// are reported by TakeChanges.
func (d *Dispatcher) Restore(states []GroupState) {
	known := d.Receivers()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range states {
		ref := GroupRef{Receiver: s.Receiver, Key: s.Key}
		if !slices.Contains(known, s.Receiver) {
			d.forgotten[ref] = true
			continue
		}
		if d.groups[ref] == nil {
			d.add(ref, &group{state: s.clone()})
		} else {
			d.groups[ref] = &group{state: s.clone()}
		}
	}
	d.regroup()
}

// regroup moves notified alerts whose group the routes changed; d.mu held.
func (d *Dispatcher) regroup() {
	// The groups formed here are not visited: they hold moved alerts only.
	for _, id := range slices.Clone(d.ordered()) {
		g := d.groups[id]
		if g == nil {
			continue
		}
		moved := false
		for _, fp := range slices.Sorted(maps.Keys(g.state.Notified)) {
			a := g.state.Notified[fp]
			var to []GroupRef
			byGroup := d.route([]alerts.Alert{a})
			for nid := range byGroup {
				if nid.Receiver == g.state.Receiver {
					to = append(to, nid)
				}
			}
			if len(to) == 0 || slices.Contains(to, id) {
				// Still grouped here, or no longer routed to this
				// receiver at all: the group resolves it as before.
				continue
			}
			for _, nid := range to {
				ng := d.groups[nid]
				if ng == nil {
					ng = &group{state: GroupState{Receiver: nid.Receiver, Key: nid.Key, Notified: map[string]alerts.Alert{},
						Labels: d.groupLabels(byGroup[nid][0])}}
					d.add(nid, ng)
				} else if ng.state.SentAt.After(g.state.SentAt) {
					// The new group notified since: what it holds is newer
					// (a persisted state left behind by an earlier move).
					continue
				}
				if _, ok := ng.state.Notified[fp]; !ok {
					ng.state.Notified[fp] = a
					if g.state.Withheld[fp] {
						if ng.state.Withheld == nil {
							ng.state.Withheld = map[string]bool{}
						}
						ng.state.Withheld[fp] = true
					}
				}
				if g.state.SentAt.After(ng.state.SentAt) {
					ng.state.SentAt = g.state.SentAt
				}
				ng.state.Seq = max(ng.state.Seq, g.state.Seq)
				d.changed[nid] = true
			}
			delete(g.state.Notified, fp)
			delete(g.state.Withheld, fp)
			moved = true
		}
		if moved && len(g.state.Notified) == 0 {
			d.forget(id)
		} else if moved {
			d.changed[id] = true
		}
	}
}

// forget drops a group; d.mu held.
func (d *Dispatcher) forget(id GroupRef) {
	delete(d.groups, id)
	delete(d.changed, id)
	d.forgotten[id] = true
	d.stale++
}

// TakeChanges returns, sorted, the groups whose state changed without a
// notification (a regroup moved notified alerts in or out: Restore; an
// undelivered notification was taken back: Undo; a flush recorded the end
// of a notified alert whose resolve is held back), whose
// state the caller persists as it does a notified group's, and the groups
// dropped (emptied by a regroup, with nothing firing and nothing notified
// left, or of a receiver no route names any more: Restore), whose
// persisted state the caller removes; each call
// returns what happened since the previous one. A group dropped and formed
// again since is reported changed only if a regroup changed it.
func (d *Dispatcher) TakeChanges() (changed, forgotten []GroupRef) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.changed) == 0 && len(d.forgotten) == 0 {
		return nil, nil
	}
	changed = slices.SortedFunc(maps.Keys(d.changed), GroupRef.compare)
	for _, id := range slices.SortedFunc(maps.Keys(d.forgotten), GroupRef.compare) {
		if d.groups[id] == nil {
			forgotten = append(forgotten, id)
		}
	}
	clear(d.changed)
	clear(d.forgotten)
	return changed, forgotten
}

// State returns a copy of the state of a group, if the dispatcher holds it.
func (d *Dispatcher) State(r GroupRef) (GroupState, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.groups[r]
	if g == nil {
		return GroupState{}, false
	}
	return g.state.clone(), true
}

// States returns a copy of the group states.
func (d *Dispatcher) States() []GroupState {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]GroupState, 0, len(d.groups))
	for _, g := range d.groups {
		out = append(out, g.state.clone())
	}
	slices.SortFunc(out, func(a, b GroupState) int { return strings.Compare(a.Receiver+a.Key, b.Receiver+b.Key) })
	return out
}

// route assigns alerts to groups, each group's alerts in the order of as.
// It hashes each alert's labels once and writes each group key into one
// buffer; a key allocates only for a group not held yet. d.mu held.
func (d *Dispatcher) route(as []alerts.Alert) map[GroupRef][]routed {
	type entry struct {
		group, alert, route int32 // indices in refs, as and d.routes
		fp                  alerts.Fingerprint
	}
	var (
		refs    []GroupRef
		index   = map[GroupRef]int{}
		entries = make([]entry, 0, len(as))
		buf     []byte
		seen    []int // the groups the alert is in: two routes may name one
		// allNames holds the sorted label names of a group_by ["..."] key.
		allNames = make([]string, 0, 16)
	)
	for ai, a := range as {
		fp := a.Fingerprint()
		seen = seen[:0]
		for i, r := range d.routes {
			if !r.Matches(a.Labels) {
				continue
			}
			names := d.keyNames[i]
			if names == nil { // group_by ["..."]: every label, sorted
				allNames = a.Labels.AppendNames(allNames[:0])
				names = allNames
			}
			buf = appendGroupKey(buf[:0], a.Labels, names)
			gi, ok := index[GroupRef{Receiver: r.Receiver, Key: string(buf)}]
			if !ok {
				ref := GroupRef{Receiver: r.Receiver}
				if g := d.groups[GroupRef{Receiver: r.Receiver, Key: string(buf)}]; g != nil {
					ref.Key = g.state.Key
				} else {
					ref.Key = string(buf)
				}
				gi = len(refs)
				refs = append(refs, ref)
				index[ref] = gi
			}
			if !slices.Contains(seen, gi) {
				seen = append(seen, gi)
				entries = append(entries, entry{group: int32(gi), alert: int32(ai), route: int32(i), fp: fp})
			}
			if !r.Continue {
				break
			}
		}
	}
	// One array holds every group's alerts, in order.
	start := make([]int, len(refs)+1)
	for _, e := range entries {
		start[e.group+1]++
	}
	for i := range refs {
		start[i+1] += start[i]
	}
	all := make([]routed, len(entries))
	next := slices.Clone(start[:len(refs)])
	for _, e := range entries {
		all[next[e.group]] = routed{a: as[e.alert], fp: e.fp, route: int(e.route)}
		next[e.group]++
	}
	out := make(map[GroupRef][]routed, len(refs))
	for i, ref := range refs {
		out[ref] = all[start[i]:start[i+1]:start[i+1]]
	}
	return out
}

// appendGroupKey appends to b the group key of labels l: what
// l.Subset(names).String() returns, for names sorted without repeats.
func appendGroupKey(b []byte, l alerts.Labels, names []string) []byte {
	b = append(b, '{')
	first := true
	for _, n := range names {
		v, ok := l[n]
		if !ok {
			continue
		}
		if !first {
			b = append(b, ", "...)
		}
		first = false
		b = append(b, n...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, v)
	}
	return append(b, '}')
}

// appendFingerprint appends fp as fp.String() writes it, 16 lowercase hex
// digits, so that a map keyed by fingerprint strings is read without
// allocating.
func appendFingerprint(b []byte, fp alerts.Fingerprint) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(fp>>shift)&0xf])
	}
	return b
}

// parseFingerprint is the inverse of alerts.Fingerprint.String: it accepts
// exactly what String writes, so that a key it accepts names the same
// alert as the key String writes.
func parseFingerprint(s string) (alerts.Fingerprint, bool) {
	if len(s) != 16 {
		return 0, false
	}
	var fp alerts.Fingerprint
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false
		}
		fp = fp<<4 | alerts.Fingerprint(c)
	}
	return fp, true
}

// Flush decides, at now, which groups notify, updates their state and
// returns the notifications, by receiver, then group key. as holds every
// current alert: firing ones and those resolved recently.
func (d *Dispatcher) Flush(now time.Time, as []alerts.Alert, f Filter) []Notification {
	d.mu.Lock()
	defer d.mu.Unlock()
	byGroup := d.route(as)
	for id, rs := range byGroup {
		if d.groups[id] == nil {
			d.add(id, &group{state: GroupState{Receiver: id.Receiver, Key: id.Key, Labels: d.groupLabels(rs[0]), Notified: map[string]alerts.Alert{}}})
		}
	}
	var out []Notification
	for _, id := range d.ordered() {
		g := d.groups[id]
		if n, ok := d.flushGroup(now, g, byGroup[id], f); ok {
			out = append(out, n)
		}
		if len(byGroup[id]) == 0 && len(g.state.Notified) == 0 {
			d.forget(id)
		}
	}
	return out
}

func (d *Dispatcher) flushGroup(now time.Time, g *group, rs []routed, f Filter) (Notification, bool) {
	// present holds every firing alert, muted or not, and ended the
	// resolved ones: both are read against what the group notified, so a
	// group that notified nothing (a storm's new groups) builds them only
	// if it notifies.
	var present, ended map[alerts.Fingerprint]alerts.Alert
	fill := func() {
		present = make(map[alerts.Fingerprint]alerts.Alert, len(rs))
		ended = map[alerts.Fingerprint]alerts.Alert{}
		for _, r := range rs {
			if r.a.Resolved(now) {
				ended[r.fp] = r.a
			} else {
				present[r.fp] = r.a
			}
		}
	}
	if len(g.state.Notified) > 0 {
		fill()
	}
	firing := make([]routed, 0, len(rs))
	fresh := 0
	var quiet []alerts.Fingerprint // the firing alerts muted or acknowledged
	var kb [16]byte
	for _, r := range rs {
		a := r.a
		if a.Resolved(now) {
			continue
		}
		if f.quiet(r.fp, a) {
			quiet = append(quiet, r.fp)
			continue
		}
		firing = append(firing, r)
		// An alert the last notification withheld is new to the receiver
		// again, as one it never heard of.
		k := appendFingerprint(kb[:0], r.fp)
		if n, ok := g.state.Notified[string(k)]; !ok || !n.StartsAt.Equal(a.StartsAt) || g.state.Withheld[string(k)] {
			fresh++
		}
	}
	ends := d.recordEnds(g, present, ended, now)
	var resolved []alerts.Alert
	for key, n := range g.state.Notified {
		if fp, ok := parseFingerprint(key); ok {
			if p, ok := present[fp]; ok && p.StartsAt.Equal(n.StartsAt) {
				continue
			}
		}
		resolved = append(resolved, n)
	}
	if len(firing) == 0 {
		g.firstSeen = time.Time{}
	} else if g.firstSeen.IsZero() {
		g.firstSeen = now
	}
	if len(firing) == 0 && len(resolved) == 0 {
		return Notification{}, false
	}
	tier := alerts.P2 // the firing alerts' tier: it sets the repeat interval
	for _, r := range firing {
		if r.a.Severity().MoreUrgent(tier) {
			tier = r.a.Severity()
		}
	}
	var due bool
	switch {
	case fresh > 0 || len(resolved) > 0:
		if len(g.state.Notified) == 0 && !g.undone {
			due = !now.Before(g.firstSeen.Add(d.timing.GroupWait))
		} else {
			due = !now.Before(g.state.SentAt.Add(d.timing.GroupInterval))
		}
	default:
		due = !now.Before(g.state.SentAt.Add(d.timing.repeat(tier)))
	}
	// Business hours and the digest hold P2 only: a group whose P1 resolved
	// while a P2 of it still fires sends the P1's resolve now.
	gate := tier
	for _, a := range resolved {
		if a.Severity().MoreUrgent(gate) {
			gate = a.Severity()
		}
	}
	if gate == alerts.P2 {
		bh := d.timing.BusinessHours
		if d.timing.P2Digest {
			// One digest a day, at the first step of the business day,
			// with what was already there at the opening.
			open := bh.Opening(now)
			due = bh.Contains(now) && g.state.SentAt.Before(open) && (fresh == 0 || !g.firstSeen.After(open))
		} else if !bh.Contains(now) {
			due = false
		}
	}
	if !due {
		if ends {
			d.changed[GroupRef{Receiver: g.state.Receiver, Key: g.state.Key}] = true
		}
		return Notification{}, false
	}
	if present == nil {
		fill()
	}
	msgAlerts := make([]notify.Alert, 0, len(firing)+len(resolved))
	firingKeys := make([]string, len(firing))
	for i, r := range firing {
		firingKeys[i] = r.fp.String()
		msgAlerts = append(msgAlerts, notify.Alert{Alert: r.a, Status: notify.StatusFiring, Fingerprint: firingKeys[i]})
	}
	refired := make(map[string]bool, len(resolved)) // the resolved, some of which may fire again
	for _, a := range resolved {
		fp := a.Fingerprint().String()
		refired[fp] = true
		msgAlerts = append(msgAlerts, notify.Alert{Alert: a, Status: notify.StatusResolved, Fingerprint: fp})
	}
	// Firing, then resolved, each by fingerprint; an alert that resolved
	// and fired again since the last notification comes last, after its
	// old episode's resolve: receivers that deduplicate by fingerprint
	// (PagerDuty's dedup_key) apply the events in order, and a trigger
	// before the resolve would close the incident of a firing alert.
	rank := func(a notify.Alert) int {
		switch {
		case a.Status == notify.StatusResolved:
			return 1
		case refired[a.Fingerprint]:
			return 2
		}
		return 0
	}
	slices.SortFunc(msgAlerts, func(a, b notify.Alert) int {
		if r := cmp.Compare(rank(a), rank(b)); r != 0 {
			return r
		}
		return strings.Compare(a.Fingerprint, b.Fingerprint)
	})
	st := g.state.clone()
	for _, a := range resolved {
		delete(st.Notified, a.Fingerprint().String())
	}
	for i, r := range firing {
		st.Notified[firingKeys[i]] = r.a
	}
	// The quiet alerts the receiver was told of and not told again now.
	st.Withheld = nil
	for _, fp := range quiet {
		k := appendFingerprint(kb[:0], fp)
		if n, ok := st.Notified[string(k)]; ok && n.StartsAt.Equal(present[fp].StartsAt) {
			if st.Withheld == nil {
				st.Withheld = map[string]bool{}
			}
			st.Withheld[string(k)] = true
		}
	}
	st.SentAt = now
	st.Seq++
	g.state = st
	g.undone = false
	m := notify.NewMessage(notify.KindNotify, st.Receiver, st.Key, st.Labels, msgAlerts, now)
	m.ID = MessageID(st.Receiver, st.Key, now)
	return Notification{Message: m, State: st.clone()}, true
}

// recordEnds stores in the group's state the end of each notified alert
// that no longer fires: the end the alert reports, or now for one that left
// the current alerts unseen. A resolve held back (group interval, business
// hours, the P2 digest) then reports when the alert resolved, not when the
// resolve went out, also once the resolved alert has left the current
// alerts (rule.ResolvedRetention) and after a restart, as Alertmanager's
// endsAt. An end already recorded is kept; an alert firing again in the
// same episode loses its recorded end. It reports whether the state
// changed; d.mu held.
func (d *Dispatcher) recordEnds(g *group, present, ended map[alerts.Fingerprint]alerts.Alert, now time.Time) bool {
	changed := false
	set := func(fp string, n alerts.Alert) {
		if !changed {
			g.state = g.state.clone()
			changed = true
		}
		g.state.Notified[fp] = n
	}
	for key, n := range g.state.Notified { // set replaces the map, not this one
		fp, known := parseFingerprint(key) // a key String never writes names no alert
		if p, ok := present[fp]; known && ok && p.StartsAt.Equal(n.StartsAt) {
			if !n.EndsAt.IsZero() {
				n.EndsAt = time.Time{}
				set(key, n)
			}
			continue
		}
		end := n.EndsAt
		if e, ok := ended[fp]; known && ok && e.StartsAt.Equal(n.StartsAt) && !e.EndsAt.IsZero() {
			end = e.EndsAt
		} else if end.IsZero() {
			end = now
		}
		if !end.Equal(n.EndsAt) {
			n.EndsAt = end
			set(key, n)
		}
	}
	return changed
}

// Undo takes back what a notification its receiver never got did to its
// group's state, as Alertmanager logs a notification only once it was
// delivered: what it reported is due again at the group's next interval.
// Each alert it resolved is put back among the notified ones, so its resolve
// goes out again, unless the group holds a newer episode of the alert (that
// one's trigger reopened what the resolve would have closed). The firing
// alerts it announced count as fresh again, unless the group has notified
// since: that later message carries every alert still firing, and its own
// delivery decides. A group forgotten meanwhile is formed again; a receiver
// no route names any more is left alone. The group is reported by
// TakeChanges for the caller to store. Messages other than KindNotify change
// no group state and are ignored.
func (d *Dispatcher) Undo(msg *notify.Message) {
	if msg.Kind != notify.KindNotify || !slices.Contains(d.Receivers(), msg.Receiver) {
		return
	}
	id := GroupRef{Receiver: msg.Receiver, Key: msg.GroupKey}
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.groups[id]
	if g == nil {
		g = &group{state: GroupState{Receiver: msg.Receiver, Key: msg.GroupKey, Labels: msg.GroupLabels,
			Notified: map[string]alerts.Alert{}, SentAt: msg.CreatedAt}}
		d.add(id, g)
	}
	st := g.state.clone()
	if st.SentAt.Equal(msg.CreatedAt) {
		for _, a := range msg.Firing() {
			if n, ok := st.Notified[a.Fingerprint]; ok && n.StartsAt.Equal(a.StartsAt) {
				delete(st.Notified, a.Fingerprint)
			}
		}
	}
	// After the firing ones: an alert that resolved and fired again within
	// the message gets its old episode back, so the resolve and the new
	// trigger go out again in that order.
	for _, a := range msg.Alerts {
		if _, ok := st.Notified[a.Fingerprint]; a.Status == notify.StatusResolved && !ok {
			st.Notified[a.Fingerprint] = a.Alert
		}
	}
	g.state = st
	g.undone = true
	d.changed[id] = true
}

// Firing returns the alerts of as that the groups of receiver have
// notified and that still fire, neither muted nor acknowledged, sorted by
// fingerprint: what the receiver was told fires and should still hear of
// (notify.Resender).
func (d *Dispatcher) Firing(now time.Time, receiver string, as []alerts.Alert, f Filter) []notify.Alert {
	type episode struct {
		fp     string
		starts int64
	}
	told := map[episode]bool{}
	d.mu.Lock()
	for _, g := range d.groups {
		if g.state.Receiver != receiver {
			continue
		}
		for fp, n := range g.state.Notified {
			told[episode{fp, n.StartsAt.UnixNano()}] = true
		}
	}
	d.mu.Unlock()
	var out []notify.Alert
	for _, a := range as {
		fp := a.Fingerprint()
		e := episode{fp.String(), a.StartsAt.UnixNano()}
		if a.Resolved(now) || !told[e] || f.quiet(fp, a) {
			continue
		}
		delete(told, e) // an alert in two groups of the receiver is listed once
		out = append(out, notify.Alert{Alert: a, Status: notify.StatusFiring, Fingerprint: e.fp})
	}
	slices.SortFunc(out, func(a, b notify.Alert) int { return strings.Compare(a.Fingerprint, b.Fingerprint) })
	return out
}

// MessageID names the notification of a group sent at t: a group notifies
// at most once per flush, and a group that is forgotten and formed again
// never reuses an ID of the log.
func MessageID(receiver, key string, t time.Time) string {
	return fmt.Sprintf("%s-%d", alerts.Labels{"r": receiver, "k": key}.Fingerprint(), t.UnixNano())
}

// Acknowledge returns the acknowledge messages for an alert: one per group
// that has notified it, by receiver, then group key. They are not part of
// the group's repeat cycle.
func (d *Dispatcher) Acknowledge(now time.Time, a alerts.Alert) []*notify.Message {
	fp := a.Fingerprint().String()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*notify.Message
	for _, id := range d.ordered() {
		g := d.groups[id]
		if n, ok := g.state.Notified[fp]; ok && n.StartsAt.Equal(a.StartsAt) {
			m := notify.NewMessage(notify.KindAcknowledge, g.state.Receiver, g.state.Key, g.state.Labels,
				[]notify.Alert{{Alert: n, Status: notify.StatusFiring, Fingerprint: fp}}, now)
			m.ID = fmt.Sprintf("%s-ack-%s", MessageID(g.state.Receiver, g.state.Key, a.StartsAt), fp)
			out = append(out, m)
		}
	}
	return out
}
