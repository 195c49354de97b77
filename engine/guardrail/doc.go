// Package guardrail watches every rule version that goes live and rolls it
// back when it hurts.
//
// For a version activated at T the guardrail compares SLO signals over a
// window before T with a window after T plus a settling time: the error
// ratio (absolute tolerance), the p99 latency (relative tolerance) and the
// goodput share (the share of offered requests served without error,
// relative tolerance). Each comparison uses the per-step samples of the two
// windows and a one-sided Welch t-test: a regression needs both a
// significant p-value (below Alpha) and an effect beyond the tolerance. With
// fewer than MinSamples on either side a comparison is Inconclusive, and
// "inconclusive" is a state, never a pass: the guardrail keeps looking until
// MaxWait and then records the version as inconclusive (and emits an event).
// The after window grows to Window and then slides, so a version
// inconclusive on its first full window is judged again on the latest one.
//
// # Cumulative change
//
// Each version is compared with the window just before it went live, so
// small steps, each within tolerance, could add up without bound (three
// versions each raising p99 latency by 20%, within a tolerance of 25%, make
// it 73% slower). Every version is therefore also compared with an older
// baseline: the window before the activation of the oldest of its
// ancestors (its parent, the parent's parent, ...) that went live within
// Drift (default 1h) before it, walking back no further than a rollback (it
// starts afresh) or a service's first version (nothing before it). These
// cumulative checks (Check.Since names that activation, and their Detail
// starts "since before vN") use the same tolerances and test, with the
// offered load of those two windows compared as above and the incidents of
// the version's own windows. Only their regressions count: a window up to
// an hour old is often not comparable (traffic moves over an hour), so an
// inconclusive or passing cumulative check changes nothing, and the
// version is still judged on its own windows. And a regression counts only
// for what the versions themselves did: the cumulative checks are
// inconclusive when the offered load of the two windows differs by more
// than 1.1x (latency and errors follow a daily ramp well below LoadRatio),
// and a cumulative regression is held against the version only when the
// versions' own step effects, each measured against its own window before
// (the decisions this Guard reached on the ancestors, and the version's own
// check), add up beyond the tolerance as well: relative p99 rises and
// goodput drops multiplied, error ratio rises added. A service that
// drifted between the windows while each version changed little is not
// rolled back; nor is anything when an ancestor's own effect is unknown to
// this Guard (judged before a restart, or not measured), and the check
// says so. A cumulative regression rolls
// the version back to its parent, as any regression: the last step is
// undone, and the versions before it, each judged on its own, stay. The
// ancestors are read from the store once per watch (a failed read is
// logged and retried at the next evaluation, without a cumulative check
// meanwhile), and the older window's grid points are kept while the watch
// is open.
//
// # Traffic changes
//
// Goodput is judged relative to the offered load, so a change of traffic
// alone does not move it; the offered load (request rate, every outcome) of
// the two windows is compared as well, by mean and by median (a spike that
// fills most of the after window but only the end of the one before moves
// the median more than the mean). When either moved beyond LoadRatio
// (default 1.5x) either way, the windows are not comparable: no comparison
// passes, and a regression counts only when the load change cannot explain
// it:
//
//   - Load rose by r: a version as good as its parent may serve as many
//     requests as before and refuse the rest, so the goodput share is held
//     to the share before divided by r (at any load ratio, not only beyond
//     LoadRatio). A share below that floor beyond the tolerance means fewer
//     requests served without error despite more traffic, and rolls back.
//     Error ratio and p99 regressions are inconclusive: overload explains
//     them.
//   - Load fell: less traffic does not explain more errors, slower answers
//     or a smaller share served, so regressions roll back as usual; healthy
//     comparisons stay inconclusive (the version was not tested at the
//     load it will meet).
//
// # Incidents
//
// The evaluator notes, every cycle, the incidents it sees that a rule
// version does not control (Guard.Note): a dependency's breaker open, its
// latency jumping, a dependency that is itself a governed service
// overloaded (see engine/evaluate). An incident overlapping the after window makes error ratio and p99
// regressions inconclusive; one overlapping either window keeps them from
// passing (before activation it may hide a regression), and the goodput
// check is made on the admitted share (1 - shed ratio) instead, which a
// failing dependency does not move but a version that refuses traffic does.
// An incident on a downstream whose rules the version changes is no
// confounder: the version may have caused it; neither is any dependency's
// incident when the version admits more than its parent on some route (a
// higher or removed rate limit or concurrency maximum), since the extra
// traffic it sends may be the cause.
//
// Every decision lists its Confounders (for example "offered load rose
// 2.30x after activation (mean 500.0/s -> 1150.0/s)") and each check's Detail
// says why it could not stand, so a person sees why a version was not
// judged.
//
// # No instance reporting
//
// A version after which no instance of its service reports any signal (they
// crash-loop on it, or it makes them refuse or drop everything before it is
// counted) leaves nothing to compare, yet it is no pass. When the service
// had traffic in the window before activation (MinSamples offered-load
// samples, a mean above 0) and the after window holds no sample of any
// metric, the decision says "no instance reported after vN" with the load
// before and the span without samples. A service without traffic still
// reports a rate of 0, which is a sample, so it is not "silent". Once the
// after window is full of silence the version is rolled back if an instance
// of the service was heard from within that window according to the
// delivery ledger (Guard.NoteHeartbeats, which the evaluator calls every
// cycle), so the service runs but reports nothing, and other services had
// samples at MinSamples of the window's grid points, so the metrics store
// did not lose the whole fleet (this needs a BatchSeries). Otherwise (no
// ledger, no instance heard from either, as when the service was removed
// on purpose, or no other service reporting) it is only flagged:
// inconclusive, then final at MaxWait with a guardrail_inconclusive event
// that says why it was not rolled back.
//
// # Rollbacks
//
// On a regression the guardrail rolls back to the version's parent through
// rules/versioning (a new rollback version, audited as the engine, with the
// decision as reason), and emits an auto_rollback event, unless the version
// is no longer active by then (a person rolled back or published while the
// cycle judged it, up to the rollback's own transaction, which checks it:
// versioning.Store.RollbackFrom): rolling back to its parent would undo
// their newer decision, so the verdict only says so. A store may answer a
// rollback with an error after storing it (a deadline passing at commit, a
// step after the commit failing) or with a version it did not store (the
// transaction aborted), so on an error the guardrail reads back whether its
// rollback landed: if it did, the decision is final with the rollback's
// number and the auto_rollback event, and the error is reported as well;
// if not, the regression stays open (Watching), its reason naming the
// failure, and the next cycle retries the rollback rather than judging
// again (a restart or a new leader that loses the retry judges the version
// again: see Restarts and leader changes). RollbackFrom refuses a second rollback of a version no longer
// active, and a retry that finds the version replaced reads whether the
// replacement is its own rollback, so none is made twice or recorded as
// lost. A rollback refused because this replica no longer leads
// (versioning.ErrFenced: the engine writes under the fence of its tick, see
// engine/leader) wrote nothing and is not read back: a rollback found then
// is the new leader's to report. Rollback versions
// themselves are watched but never rolled back, so the guardrail cannot
// loop; a service's first version is not watched (there is nothing before
// it). While a version is being judged, Watching is true and the engine
// proposes nothing new for the service, so every version it proposes gets
// its own verdict.
//
// # Versions replaced before a verdict
//
// A person may still publish (or emergency-publish) while a version is
// judged. A version replaced before its watch reached a verdict (v2, then
// v3 before v2 was judged) gets a final decision of its own, verdict
// Superseded, naming the version that replaced it and when (SupersededBy,
// SupersededAt), with a guardrail_superseded event, so the timeline and the
// audit show that it was never judged. The new watch carries on the chain:
// its Unjudged lists the versions replaced before a verdict since the last
// one in force before them, it is judged against the window before the
// oldest of them (v2's baseline, a period no unjudged version ran in, not
// v2's own), and a regression rolls back to that last version (Parent: v1),
// past them, with a reason that names them ("rolled back v3 to v1; v2 went
// live 40s before v3 and was never judged"). The store's rules hold as for
// any rollback: RollbackFrom refuses it when a person replaced v3 since.
// A rollback (the guardrail's or a person's) starts afresh: it is never
// rolled back, and the period before it, the one it undid, is no baseline
// for the next version. A regression whose rollback is still to be retried
// when another version replaces it is settled as before, not carried on.
//
// The chain is bounded by how far back the guardrail reads: the baseline
// lies at most Settle + MaxWait (the time a version is watched) before the
// activation judged. A longer chain is judged against the window before the
// oldest of its versions that went live within that span (Baseline says
// which), and still rolled back to the version before the whole chain. The
// grid points of such a window, and the incidents noted in it, are kept
// while its watch is open, so the points kept reach back at most Window +
// 2 x (Settle + MaxWait). The chain
// lives in memory: a new leader judges the active version against the
// window before its own activation and rolls it back to its parent (see
// Restarts and leader changes). Two
// versions that go live between two cycles are seen as one replacement:
// the one never observed gets no decision.
//
// # Reads
//
// With a BatchSeries (SignalSeries is one) every window is assembled from
// samples on one grid shared by all services: the multiples of Step, as
// time.Truncate and the engine's ticks count them. A window's samples are
// the grid points inside it (Window/Step before activation; after it, from
// activation + Settle, growing to Window/Step + 1 at most and then
// sliding), whatever the activation time. The evaluator hands every
// cycle's signal snapshot to Record; a tick on the grid gives every
// service's request rate, error ratio, p99 latency and shed ratio at that
// point, and the goodput and admitted shares are derived from them as their
// queries compute them. So a cycle whose ticks fall on
// the grid (an interval that divides Step) sends no query for the
// guardrail at all. The points no snapshot covered (before the engine
// started or took the lead, ticks off the grid, a failed or partial read) are read
// from the store when a window needs them: the services missing the same
// span of points together (one span per service, from its first missing
// point to its last), one range query per metric for up to 200 services.
// With ticks that do not fall on every grid point (a Step that is not a
// multiple of the interval, such as 15 s with 10 s ticks: every other point)
// the others are read so, each once, when a window first reaches them; the
// defaults (10 s interval, 10 s Step) read none. The points are kept per service
// until no window can reach them (Window + Settle + MaxWait, longer while a
// version is judged past unjudged ones or against an older baseline, see
// above, or after the fact, see Restarts and leader changes), which bounds the memory
// to about that many Steps per service.
//
// A point is what the store answered when it was recorded or read: a
// scrape that lands later for that instant does not change it. A signal
// the reader marks stale or not finite is no sample. Otherwise the samples
// are the range queries' (the same templates; a snapshot's are summed in
// another order).
//
// With a Series that is not a BatchSeries (or for a service whose batch
// failed, e.g. a custom template that answers more labels than the
// service), a watch reads its service alone on a grid anchored at its
// activation: the window before once, a growing after window only where it
// is new.
//
// # Partial data
//
// A read whose answer warns that data may be missing (a store of a
// federated setup unavailable, a remote read endpoint down: see
// signals.PartialData) is never judged on: its windows may lack exactly the
// series that matter, so a healthy version would look silent or regressed
// and a bad one healthy. SignalSeries returns such an answer as a
// *PartialError instead of samples, and every watch the read covers (the
// service read alone, or all the services of a batch, since the warning
// does not say whose series are missing) is held: Inconclusive, nothing
// rolled back, its reason "metrics partial: <read>: <warning>". Watches
// whose reads were whole are judged as usual. A held watch is judged
// again, from the store, at the next Observe; like any inconclusive one it
// becomes final at MaxWait, with a guardrail_inconclusive event naming the
// partial read. The engine holds the whole cycle when its own reads
// (the signals the guardrail judges by, the incidents) are partial, and
// then calls Hold instead of Observe: nothing is read, judged or rolled
// back, and the open watches are held likewise, final at MaxWait with the
// engine's reason. Guard.Partial lists the cycle's partial reads (the engine
// reports them with its own, and counts the cycle in
// governor_engine_partial_reads_total), and the guardrail logs the
// services it held. The points of a partial read are not kept, and Record
// ignores a snapshot whose request rate, error ratio, p99 latency, shed
// ratio or freshness is partial or failed (a failed freshness query marks
// every service stale), so such points are read again from the store once
// it answers whole rather than taken for points without samples.
// Warnings that are not about missing data (infos, PromQL annotations)
// change nothing.
//
// # Restarts and leader changes
//
// Watches, verdicts, rollbacks still to be retried and noted incidents live
// in memory: a restarted engine or a new leader starts from the active
// versions and their activation times, and reads the grid points it has not
// seen from the store. A version live for at most Settle + MaxWait when a
// Guard first sees it is watched as usual (without the chain of unjudged
// versions before it, see above). One live for longer, up to Recover
// (default 24h), may never have been judged: it went live while no engine
// watched it (the engine down, restarting, or without a leader), or its
// verdict was lost with the Guard that reached it (a regression whose
// rollback the store refused, say during a database failover that also
// moved the lead). It is judged after the fact (Decision.Late) on the
// windows around its activation, which the metrics store still holds: the
// window before its activation against its first full after window, and,
// when that is inconclusive, against the last one a live watch reaches
// (activation + Settle + MaxWait). A regression is rolled back to its
// parent as usual; the incidents of that time are unknown (they were noted
// in memory), so a regression found there is rolled back only when it still
// shows on the current window (the latest Window, against the same window
// before): one that no longer does, as when a live watch explained it by an
// incident and ended it inconclusive, is not rolled back, and the decision
// is final Inconclusive, with a guardrail_inconclusive event, saying the
// regression seen after activation no longer shows. A read that may lack
// data holds it, as any watch, up to MaxWait from when this Guard first saw
// it, then it ends inconclusive. When it cannot be judged (its windows no
// longer in the metrics store, a service silent then) the decision is final
// Inconclusive with a guardrail_inconclusive event that says it could not
// be judged after the fact, and proposals resume, as they do when a live
// watch ends inconclusive at MaxWait (holding them until a person acts
// would stop every service's proposals on an engine started beside a
// metrics store that does not reach back that far). A rollback version is
// judged after the fact too, but never rolled back. A version live for
// longer than Recover when first seen is taken as judged by the run that
// watched it: it is not watched, and the Guard logs that once. A version
// judged before the restart is judged again on the same windows but without
// the incidents the live watch knew of, so its late decision may differ
// from the live one; it is never rolled back for a regression that does not
// show now.
package guardrail
