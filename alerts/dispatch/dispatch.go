package dispatch

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
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
	a   alerts.Alert
	fp  alerts.Fingerprint
	key string // fp.String()
	// route is the index of the route that put it in the group, whose
	// group_by names the group's labels (groupLabels).
	route int
}

// groupLabels returns the labels of the group r is in.
func (d *Dispatcher) groupLabels(r routed) alerts.Labels {
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

func refOf(id string) GroupRef {
	recv, key, _ := strings.Cut(id, "\x00")
	return GroupRef{Receiver: recv, Key: key}
}

func (r GroupRef) id() string { return r.Receiver + "\x00" + r.Key }

// Dispatcher groups and times notifications. It is safe for concurrent use.
type Dispatcher struct {
	routes []Route
	timing Timing

	mu     sync.Mutex
	groups map[string]*group // by receiver + "\x00" + key
	// changed and forgotten hold the groups (by id) whose state a regroup
	// changed without a notification, and those dropped, since the last
	// TakeChanges.
	changed, forgotten map[string]bool
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
	return &Dispatcher{routes: routes, timing: timing, groups: map[string]*group{}, changed: map[string]bool{},
		forgotten: map[string]bool{}}, nil
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
		id := GroupRef{Receiver: s.Receiver, Key: s.Key}.id()
		if !slices.Contains(known, s.Receiver) {
			d.forgotten[id] = true
			continue
		}
		d.groups[id] = &group{state: s.clone()}
	}
	d.regroup()
}

// regroup moves notified alerts whose group the routes changed; d.mu held.
func (d *Dispatcher) regroup() {
	for _, id := range slices.Sorted(maps.Keys(d.groups)) {
		g := d.groups[id]
		if g == nil {
			continue
		}
		moved := false
		for _, fp := range slices.Sorted(maps.Keys(g.state.Notified)) {
			a := g.state.Notified[fp]
			var to []string
			byGroup := d.route([]alerts.Alert{a})
			for nid := range byGroup {
				if recv, _, _ := strings.Cut(nid, "\x00"); recv == g.state.Receiver {
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
					recv, key, _ := strings.Cut(nid, "\x00")
					ng = &group{state: GroupState{Receiver: recv, Key: key, Notified: map[string]alerts.Alert{},
						Labels: d.groupLabels(byGroup[nid][0])}}
					d.groups[nid] = ng
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
func (d *Dispatcher) forget(id string) {
	delete(d.groups, id)
	delete(d.changed, id)
	d.forgotten[id] = true
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
	for _, id := range slices.Sorted(maps.Keys(d.changed)) {
		changed = append(changed, refOf(id))
	}
	for _, id := range slices.Sorted(maps.Keys(d.forgotten)) {
		if d.groups[id] == nil {
			forgotten = append(forgotten, refOf(id))
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
	g := d.groups[r.id()]
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

// route assigns alerts to (receiver, group key).
func (d *Dispatcher) route(as []alerts.Alert) map[string][]routed {
	out := map[string][]routed{}
	for _, a := range as {
		fp := a.Fingerprint()
		ra := routed{a: a, fp: fp, key: fp.String()}
		var seen []string // the groups the alert is in: two routes may name one
		for i, r := range d.routes {
			if !r.Matches(a.Labels) {
				continue
			}
			gl := a.Labels.Subset(r.groupBy())
			id := r.Receiver + "\x00" + gl.String()
			if !slices.Contains(seen, id) {
				seen = append(seen, id)
				ra.route = i
				out[id] = append(out[id], ra)
			}
			if !r.Continue {
				break
			}
		}
	}
	return out
}

// Flush decides, at now, which groups notify, updates their state and
// returns the notifications. as holds every current alert: firing ones and
// those resolved recently.
func (d *Dispatcher) Flush(now time.Time, as []alerts.Alert, f Filter) []Notification {
	byGroup := d.route(as)
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, rs := range byGroup {
		if d.groups[id] == nil {
			recv, key, _ := strings.Cut(id, "\x00")
			d.groups[id] = &group{state: GroupState{Receiver: recv, Key: key, Labels: d.groupLabels(rs[0]), Notified: map[string]alerts.Alert{}}}
		}
	}
	var out []Notification
	for _, id := range slices.Sorted(maps.Keys(d.groups)) {
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
	present := make(map[string]alerts.Alert, len(rs)) // every firing alert, muted or not
	ended := map[string]alerts.Alert{}
	var firing, fresh []alerts.Alert
	var quiet []string // the firing alerts muted or acknowledged
	for _, r := range rs {
		a := r.a
		if a.Resolved(now) {
			ended[r.key] = a
			continue
		}
		present[r.key] = a
		if f.quiet(r.fp, a) {
			quiet = append(quiet, r.key)
			continue
		}
		firing = append(firing, a)
		// An alert the last notification withheld is new to the receiver
		// again, as one it never heard of.
		if n, ok := g.state.Notified[r.key]; !ok || !n.StartsAt.Equal(a.StartsAt) || g.state.Withheld[r.key] {
			fresh = append(fresh, a)
		}
	}
	ends := d.recordEnds(g, present, ended, now)
	var resolved []alerts.Alert
	for fp, n := range g.state.Notified {
		if p, ok := present[fp]; ok && p.StartsAt.Equal(n.StartsAt) {
			continue
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
	for _, a := range firing {
		if a.Severity().MoreUrgent(tier) {
			tier = a.Severity()
		}
	}
	var due bool
	switch {
	case len(fresh) > 0 || len(resolved) > 0:
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
			due = bh.Contains(now) && g.state.SentAt.Before(open) && (len(fresh) == 0 || !g.firstSeen.After(open))
		} else if !bh.Contains(now) {
			due = false
		}
	}
	if !due {
		if ends {
			d.changed[GroupRef{Receiver: g.state.Receiver, Key: g.state.Key}.id()] = true
		}
		return Notification{}, false
	}
	msgAlerts := make([]notify.Alert, 0, len(firing)+len(resolved))
	for _, a := range firing {
		msgAlerts = append(msgAlerts, notify.Alert{Alert: a, Status: notify.StatusFiring, Fingerprint: a.Fingerprint().String()})
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
	for _, a := range firing {
		st.Notified[a.Fingerprint().String()] = a
	}
	// The quiet alerts the receiver was told of and not told again now.
	st.Withheld = nil
	for _, fp := range quiet {
		if n, ok := st.Notified[fp]; ok && n.StartsAt.Equal(present[fp].StartsAt) {
			if st.Withheld == nil {
				st.Withheld = map[string]bool{}
			}
			st.Withheld[fp] = true
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
func (d *Dispatcher) recordEnds(g *group, present, ended map[string]alerts.Alert, now time.Time) bool {
	changed := false
	set := func(fp string, n alerts.Alert) {
		if !changed {
			g.state = g.state.clone()
			changed = true
		}
		g.state.Notified[fp] = n
	}
	for fp, n := range g.state.Notified { // set replaces the map, not this one
		if p, ok := present[fp]; ok && p.StartsAt.Equal(n.StartsAt) {
			if !n.EndsAt.IsZero() {
				n.EndsAt = time.Time{}
				set(fp, n)
			}
			continue
		}
		end := n.EndsAt
		if e, ok := ended[fp]; ok && e.StartsAt.Equal(n.StartsAt) && !e.EndsAt.IsZero() {
			end = e.EndsAt
		} else if end.IsZero() {
			end = now
		}
		if !end.Equal(n.EndsAt) {
			n.EndsAt = end
			set(fp, n)
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
	id := GroupRef{Receiver: msg.Receiver, Key: msg.GroupKey}.id()
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.groups[id]
	if g == nil {
		g = &group{state: GroupState{Receiver: msg.Receiver, Key: msg.GroupKey, Labels: msg.GroupLabels,
			Notified: map[string]alerts.Alert{}, SentAt: msg.CreatedAt}}
		d.groups[id] = g
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
// that has notified it. They are not part of the group's repeat cycle.
func (d *Dispatcher) Acknowledge(now time.Time, a alerts.Alert) []*notify.Message {
	fp := a.Fingerprint().String()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*notify.Message
	for _, id := range slices.Sorted(maps.Keys(d.groups)) {
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
