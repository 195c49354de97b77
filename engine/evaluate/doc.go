// Package evaluate runs one evaluation cycle of the decision engine: read the
// fleet's signals at the tick time, update the load scores, ask the
// recommender for every service, submit what it recommends (inside the
// service's band it applies itself) and let the guardrail judge the versions
// that went live. The cycle takes its time as an argument, so the same code
// runs live, in tests with a fake clock and in a backtest over recorded
// metrics.
//
// # Events
//
// Besides the auto_apply and proposal events of its own changes, a cycle
// emits what it notices in the fleet and the rules store: instance_stale
// and instance_recovered from the delivery ledger, breaker_open from the
// breaker metrics, and emergency_publish for every emergency publication.
// The latter come from the audit log (ActionEmergency entries) after a
// watermark the replicas share (SQLWatermark, table
// governor_engine_watermarks): a publication made while no engine led, or
// superseded before one looked, is reported by the next leader. The report
// comes before the watermark moves (at least once): a crash between the two
// loses nothing, and the publication is reported again under the same key
// (Emergency.Key), which the alerts manager folds into the one alert it
// keeps per service. A move made by a cycle whose tick is no longer the
// newest claimed (a leader frozen past its lease) is refused
// (versioning.ErrFenced) and ends that cycle's writes, so the next leader
// reports from where the mark was. The first time the watermark is set, publications
// before the engine's start (Options.Since) are history, not news.
//
// # After a rollback
//
// A cycle in which the guardrail rolls a service's version back proposes
// nothing for that service (its recommendation says "held: the guardrail
// rolled back vN as vM this cycle"): the rollback is watched from the next
// cycle on, which holds proposals until its verdict, and a version made in
// the same cycle would replace it unwatched and be judged against the
// window in which the regression ran.
//
// # Services that go away
//
// A service absent from a cycle's signals loses its load-score gauge at
// once and its API score after the tracker's MaxGap. Its active version is
// still handed to the guardrail while it was seen within
// Options.ForgetAfter (default 1h) or the guardrail still judges it (and
// once, when the engine has not read that version before: an engine that
// restarts or takes the lead after the service went silent still hands it
// to the guardrail, which watches it while it is recent), so a
// version after which no instance reports any more gets a decision (see
// package engine/guardrail), with the delivery ledger's latest heartbeat of
// each service (guardrail.Guard.NoteHeartbeats) telling a service that runs
// but reports nothing from one that was removed. After ForgetAfter without
// signals the engine forgets the service, every piece of what it keeps of
// it at once: the recommender's state (recommend.Recommender.Forget: its
// controller and healthy baseline, learned alert levels included), its
// load-score smoothing and hysteresis (loadscore.Tracker.Forget), the
// active version read, its last score and recommendation (even when the
// load-score tracker's MaxGap is longer), and its alert levels still
// raised. Each of those is resolved with a level_cleared event, as when a
// reading falls back below its level ("<svc> p99 latency: <svc> no longer
// reports (no signals for over 1h0m0s, forgotten): its warn level is
// cleared", Value 0, the level in force as Threshold), so the alerts
// manager closes the alert rather than it staying raised in the engine
// and its state for ever; a level raised for a service this replica never
// saw (restored from another leader's state) is forgotten so ForgetAfter
// after it was last reported. One back sooner continues where it stopped;
// one back later starts afresh. A downstream whose latency series is gone
// keeps its baseline and detector as long, then is forgotten likewise.
//
// Only a cycle whose signal read is whole forgets: while any signal query
// fails or answers with a warning that data may be missing (see Partial
// data), a service absent from the read may be one whose series a store
// did not return, so nothing is forgotten and no raised level is resolved
// on that account, however long the outage lasts (the engine logs which
// services it held). The first whole read after it forgets those still
// absent, counting from when they were last seen. A store that never
// answers whole forgets no service.
//
// The saved state forgets them too: the events row no longer carries the
// raised levels, the control row the controller, and the next save
// replaces the service's baseline row (and a forgotten downstream's row)
// with a forgotten row (empty data), which a replica restoring it obeys
// (it forgets the service or downstream if it still kept it) and which is
// pruned after max_age like any row, so no forgotten service comes back
// at a takeover. Per-cycle holds (a partial read, a rollback this cycle)
// are not kept across cycles at all. Rows written before this behaviour
// decode as before; an engine that predates it ignores a forgotten row as
// undecodable and keeps what it has.
//
// # State across a leader change
//
// State (table governor_engine_state) persists what a cycle learned and
// reported: the alert levels crossed, open breakers and instances in a bad
// state, every service's healthy baseline and every downstream's anomaly
// detector, every service's load-score smoothing and hysteresis and its
// ceiling controller (PID). The leader saves a share of the baselines and
// detectors every cycle and the scores and controllers whole; a replica
// taking over restores it before its first cycle, so it neither re-raises
// what was reported nor misses a resolve, its detectors and learned levels
// are warm at once, and its next scores and recommendations are the ones
// the old leader would have computed. State older than max_age is not
// restored. A leader that lost the lead during a cycle saves nothing of it:
// SQLState refuses the rows of a cycle older than the newest tick claimed
// (engine/leader), checked in the statement that writes them, so they
// cannot mix with what the new leader restored. Evaluator.AlertLevelsInForce shows, per service, the alert
// levels in force, where each comes from and the baseline behind learned
// ones (the engine API and the service page show them).
//
// With Options.Levels a cycle also compares every service's p99 latency and
// error ratio with its alert levels and emits level_crossed and
// level_cleared (see AlertLevels: learned p99 levels from the healthy
// baseline, or fixed ones; error-ratio levels learned likewise over
// configured floors, or configured); the alerts
// manager's built-in rule GovernorSignalAboveLevel turns them into P1
// (critical) and P2 (warn) alerts after 5 minutes.
//
// # Guardrail incidents
//
// Before the guardrail judges the active versions, each cycle notes for it
// (guardrail.Guard.Note) the incidents a rule version does not control: every
// downstream breaker open (kind breaker_open), every downstream whose p99
// latency jumped beyond twice its learnt baseline (SlowDownstream, from
// governor_sdk_downstream_duration_seconds), every downstream whose p99 the
// anomaly detector of package engine/thresholds, one per service and
// downstream fed every cycle, scores as a rise it has not seen
// (LatencyAnomaly: a dependency in trouble short of the 2x jump; after the
// detector's warm-up of 300 cycles), and every downstream named like
// a governed service whose load score is overloaded (DependencyOverloaded).
// The guardrail then does not blame a version for errors or latency such an
// incident explains; see package engine/guardrail.
//
// # Partial data
//
// A read whose query warned that data may be missing (a store of a
// federated setup unavailable, a target not scraped; see
// signals.PartialData) leaves its signals Partial, which the load score
// leaves out like any unknown signal. Nothing is proposed for a service
// with a partial signal: its recommendation is inconclusive and its reason
// begins with "metrics partial: <signal>: <warning>". While a signal the
// guardrail judges by (request rate, error ratio, p99 latency, shed ratio,
// or the freshness that decides staleness) or an incident read (breakers,
// downstream latency) is partial, the guardrail judges nothing and rolls
// nothing back: a service whose series the store lost would read as one
// that reports nothing. Such a cycle still tells the guardrail it is held
// (guardrail.Guard.Hold): a watch held past the guardrail's MaxWait ends
// inconclusive for good, its reason and guardrail_inconclusive event
// saying what was partial, as when the guardrail's own reads stay partial,
// so a store that stays partial watches no version, and withholds no
// service's proposals on that account, for ever. A snapshot with such a partial signal is not
// recorded as the guardrail's samples (guardrail.Guard.Record): its grid
// points are read from the store when a window needs them. The
// guardrail's own range reads may warn as well: each then holds only the
// watches it covers (inconclusive, "metrics partial: <read>: <warning>",
// never rolled back; see the guardrail's documentation), and the others
// are judged. Result.Partial (the cycle's partial reads, the guardrail's
// included) and Result.GuardrailHeld say what was partial, the engine and
// the guardrail log the holds, and the engine counts such cycles
// (governor_engine_partial_reads_total). A partial
// breaker read closes no breaker, and a partial downstream p99 is neither
// learned nor reported. Warnings that are not about partial data (PromQL
// info and warning annotations, a sample lacking its scope's labels)
// change nothing; Tick logs them, each distinct set at most once per ten
// minutes of cycle time.
//
// A store may also answer without warning but without some instances: a
// target down or a scrape failing leaves the instance's series out, so
// the service's summed request rate shrinks with them, and a service
// overloaded below a ceiling nobody seems to reach would have its ceiling
// cut to the shrunken rate's share, down to the band's floor. With a
// delivery ledger (Options.Fleet), a recommendation that lowers a
// service's ceiling while fewer of its instances report (those with a
// current SDK sample, signals.Entry.Reporting) than the ledger has live
// and settled is held: inconclusive, its reason beginning "metrics
// partial: <n> of <m> instances reported". The ledger's instances are the
// expectation because they are heard from over NATS, independently of
// the metrics store. A raise, a re-split or a breaker change is not held:
// the missing traffic only makes the ceiling look less reached.
//
// Settled means neither joining nor leaving, for the two see an instance
// come and go at different times: the ledger hears from an instance when
// it starts, the metrics count it only once its target is discovered and
// scraped; the metrics drop it as soon as its target goes, the ledger
// keeps it live until GONE (three missed heartbeats, 35s by default).
// Counting every live instance, a rolling deploy or a scale-out would hold
// nearly every cut, just when a service short of capacity needs one. So
// an instance is expected to report only once the ledger first heard from
// it at least Options.ReportingGrace ago (default 1m, the default rate
// window: four 15s scrape intervals) and while it heartbeats (heard from
// within one and a half of its heartbeat periods). An instance that
// heartbeats but is not scraped is a scrape gap: a grace after it started
// it is expected, and its service's cuts are held for as long as it is
// missing. The reason counts the instances left out ("not counting <k>
// joining or leaving"). The counts are by service, not by instance: while
// some instances join, the new ones already scraped can stand in for as
// many settled ones that are not, so a gap that begins during a deploy is
// seen once the deploy's instances have settled. An instance that has just
// stopped is still expected until it misses a heartbeat (up to 15s at the
// default 10s heartbeat): a service scaling in may have a cut held for a
// cycle or two. When the ledger first heard from an instance is its Since
// as this engine first saw it (its first state begins with its first
// message); an engine started just after a change of state (a version
// published) takes the instances for joining for at most one grace.
//
// A signal query that fails (the store timed out or refused it, or its
// template does not aggregate by service) holds every proposal of the
// cycle, each recommendation's reason beginning "metrics failed: <signal>:
// <error>", Tick's error wraps ErrMetricsFailed, and the engine counts such
// cycles (governor_engine_failed_reads_total): the load score leaves
// a failed term out and spreads its weight over the others, which suits a
// signal a service does not export, not a store that stopped answering,
// and a change inside the auto-apply band would apply itself on a score
// missing its latency or in-flight term.
//
// An incident read (breakers, downstream latency) that fails holds the
// guardrail for the cycle the same way, its reason "incident read failed:
// <error>": a breaker open or a dependency slow that the read could not
// see would otherwise be blamed on a version. A failed breaker read closes
// no breaker.
//
// # Cycle deadline
//
// A cycle whose ctx ends while its signals are read (its deadline, a
// shutdown) stops there with an error wrapping context.Cause(ctx): the
// queries it cut short read as unknown, and nothing (load scores,
// controllers, alert levels, the guardrail's samples) is updated from
// them. The next cycle reads afresh.
//
// Each cycle also hands its signal snapshot to the guardrail
// (guardrail.Guard.Record): on the guardrail's Step grid it is every
// service's sample for that instant, so the windows the guardrail compares
// need no query of their own while the ticks fall on the grid.
package evaluate
