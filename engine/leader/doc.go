// Package leader decides which engine replica evaluates, and makes sure no
// evaluation tick runs twice.
//
// Postgres holds a session-level advisory lock on one dedicated connection:
// the replica holding it leads. The leader checks its connection every
// CheckInterval; when the connection breaks (the process died, the network
// split, the session was terminated) the lock is gone with it and a standby,
// retrying every RetryInterval, takes over within a few seconds. Each tick is
// claimed in the table governor_engine_ticks through the lock-holding
// connection (an INSERT that only succeeds for a tick later than every one
// claimed), so a tick a dying leader evaluated is never evaluated again by
// its successor, and ticks only move forward. The table comes from
// migration 00400 (package migrations); the leader deletes ticks older than
// TickRetention as it claims new ones.
//
// Ticks are named by the replicas' wall clocks (the interval-aligned time),
// while the lease is measured in durations on each replica's own clock, so
// only ticks depend on the clocks agreeing. A replica whose clock runs
// ahead of the database's by more than MaxClockSkew claims nothing
// (ErrClockSkew, logged by RunTicks): its ticks, later than any the other
// replicas name, would keep them from claiming until their clocks caught up.
// A replica whose clock lags the newest claimed tick by more than
// MaxClockSkew claims nothing either, until its clock reaches that tick;
// its claims fail with ErrClockSkew, naming the tick and the replica that
// claimed it, rather than reading as ticks another replica took.
//
// # Lease
//
// Holding the lock is not enough to lead: a leader cut off from the
// database (a hung connection, a partition) cannot tell that the server has
// ended its session and that a standby took the lock. So leadership is a
// lease on the leader's own clock: every check or claim the connection
// answers renews it for Lease from when it was sent, every call on the
// connection is bounded by a third of the Lease and never outlasts it, and
// a leader whose lease runs out stops leading then (IsLeader turns false,
// LeaderContext's contexts end), even while its calls hang. A replica that
// takes the lock leads only one Lease later, when the lease of any leader
// before it has run out. The lock-holding session also gets an
// idle_session_timeout (SessionTimeout), so that the server frees the lock
// of a leader that went silent rather than keeping it until TCP gives up.
// No lock is held across database calls where IsLeader needs it.
//
// # Fencing
//
// RunTicks runs each tick under LeaderContext: when the lead ends mid-tick,
// what is left of it (reads, proposals, the state saved) fails with the
// context instead of running beside the next leader's tick. The context
// alone cannot stop a write: a leader frozen mid-tick for longer than its
// lease (a GC pause, a suspended VM, a stalled disk) resumes before its
// context's timer has fired, and what it sends reaches the database after
// its successor's ticks. So the newest claimed tick is also a fencing
// token, checked by the writer: evaluate.SQLState refuses the state rows
// of a cycle older than it, and the rules store refuses the proposals,
// auto-applied versions and rollbacks of a cycle whose tick is older than
// it (versioning.Fence, which the engine attaches to each tick's context;
// the refusal, versioning.ErrFenced, names both ticks and the replica that
// claimed the newer one); evaluate.SQLWatermark moves the emergency mark
// only in a statement that finds no newer tick. People's writes carry no
// fence and are never refused this way.
//
// A claim is one INSERT that takes no lock a writer holds: it never waits
// for a writer, so a leader frozen in the middle of a write cannot hold up
// its successor's claims (and, through the claims' deadline, its lease).
// The price is that a check only sees the ticks committed before the
// snapshot it reads in; under READ COMMITTED each statement takes its own.
// So the check belongs in the statement that writes, committed with it:
// evaluate.SQLState and evaluate.SQLWatermark do so. A check in a
// statement before the writes of a transaction misses a tick claimed
// between the two, or before the commit, and the writes land after the
// claim; the rules store's check follows its lock of the service's row,
// which orders it against the successor's writes to that service but not
// against the claim or the successor's reads.
//
// # Metrics
//
// Every replica serves, leading or not: LeaderMetric (1 on the replica
// that leads), LastTickMetric (the newest tick claimed by any replica, as
// this replica last read it: a standby at each campaign attempt, the
// leader at each claim) and TickIntervalMetric (the interval RunTicks runs
// with). Only a leader evaluates alert rules, so an engine in which no
// replica leads cannot page about it: a Prometheus outside the engine
// alerts on the age of max(LastTickMetric) instead (alerts/README.md).
//
// Local is the single-node elector of the SQLite mode: always the leader,
// ticks claimed in memory; NewLocal's serves the same metrics.
package leader
