// Package leader decides which engine replica evaluates, and makes sure no
// evaluation tick runs twice.
//
// Postgres holds a session-level advisory lock on one dedicated connection:
// the replica holding it leads. The leader checks its connection every
// CheckInterval; when the connection breaks (the process died, the network
// split, the session was terminated) the lock is gone with it and a standby,
// retrying every RetryInterval, takes over within a few seconds. Each tick is
// claimed in the table governor_engine_ticks through the lock-holding
// connection (INSERT ... ON CONFLICT DO NOTHING on the tick time), so a tick a
// dying leader evaluated is never evaluated again by its successor. The table
// comes from migration 00400 (package migrations); the leader deletes ticks
// older than TickRetention as it claims new ones.
//
// Local is the single-node elector of the SQLite mode: always the leader,
// ticks claimed in memory.
package leader
