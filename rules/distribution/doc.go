// Package distribution gets approved rule versions from the rules store into
// every SDK instance and keeps the delivery ledger of what each instance runs.
//
// # Relay
//
// Relay claims rows of the store's transactional outbox (versioning.Outbox),
// writes each version's envelope to the JetStream KV bucket keyed by service
// (Publisher), and marks the row done. It wakes at once when the store says a
// row was written (Outbox.OutboxReady in-process, or NOTIFY governor_outbox
// via ListenPostgres from another process) and sweeps periodically as a
// safety net; a publication that fails is retried by the same relay with
// back-off while it holds the row's lease. Publishing is idempotent by version: a version is never overwritten by
// an older one (compare-and-set on the KV revision), and re-publishing the
// same version is a no-op, so a relay killed after the store committed but
// before it marked the row done leaves the row to the next relay, which
// publishes it exactly once. A row retried after its lease ended, or
// claimed again, is relayed as the store has it then, and one the store no
// longer has (the database was reset) is dropped with a warning. A row is
// marked done, or undeliverable, only while the store's row of its id is
// still the one claimed (same service, version and checksum): after a
// restore from a backup the id can name another row, which the relay never
// delivered. An Outbox that is an ItemMarker (MemoryOutbox) checks it in
// the mark itself; with a rules store that marks by id alone, the relay
// reads the row's version from the store first (Get) and drops the row if
// the store no longer has it with the row's checksum.
//
// A version that cannot be published as it is, is given up on instead of
// retried: a value larger than the server accepts (the connection's
// max_payload less KVHeaderRoom; Publisher refuses it with a *TooLargeError
// naming the service, version, size and limit), a row whose payload is
// not its version's envelope, or a version the bucket and the store
// disagree about (ErrConflict, reason "conflict"): the bucket holds the
// version with other content, or holds a newer version the rules store does
// not have (checked when the Outbox is a rules store, versioning.Reader).
// The rules database was then reset or restored from a backup and numbers
// its versions anew; instances never apply other content under a version
// number they run nor go back to a lower one, so such a row is listed
// rather than marked published (see Recovery below: the relay raises the
// store's numbering so that the next version is delivered). The relay records it in the store
// (versioning.Outbox.MarkOutboxUndeliverable: reason, error text, size,
// limit, time and RelayOptions.Name, audited as "undeliverable") in the
// transaction that takes the row out of the claims, so it is not claimed
// again after the lease, by this relay after a restart or by any replica.
// The relay whose record reached the store logs it once at error level,
// counts it (governor_distribution_relay_rows_total{outcome="undeliverable"})
// and tells RelayOptions.OnUndeliverable. Relay.Undeliverable (and
// Plane.Undeliverable, which the engine API and the web UI read) lists the
// store's open records, newest first, whichever relay wrote them;
// governor_distribution_relay_undeliverable_rows is that count as of the
// relay's last pass (store-wide, so every replica reports the same value:
// aggregate with max, not sum). When a newer version of the service is
// marked done, the store supersedes the record: no longer listed, kept as
// history (versioning.FailureFilter.History). A relay whose server accepts
// more than a too-large row needed (checked at its first pass and whenever
// the server's limit grows, e.g. a reconnect after max_payload was raised)
// requeues the row (versioning.Outbox.RequeueOutbox) and publishes it. The
// rows metric counts superseded outcomes of the publisher only; the
// supersession of undeliverable records shows in the gauge and the store's
// history. The sizes fit by
// construction: a store accepts rulesets of at most rules.MaxBytes, whose
// envelope (rules.MaxEnvelopeBytes) and canary record (watch.MaxCanaryBytes)
// fit a server with the default max_payload of 1 MiB.
//
// # Recovery after the rules database was reset or restored
//
// A rules database restored from a backup (or reset) numbers new versions
// from its own last number, below the version the bucket holds and the
// fleet runs; instances never go back to a lower number, so such versions
// would never reach them. When the Outbox implements versioning.Numbering
// (the PostgreSQL and SQLite stores do), the relay raises the store's
// numbering of each service to the highest version the bucket holds or
// held (the stable key, and any canary staged, aborted or promoted, which
// StartCanary would refuse again): at its first pass, again until it
// succeeds (so at every engine start), and for a service whose row is in
// conflict with the bucket. A service whose highest version in the store
// (Services) is already at or above the bucket's is skipped, so an
// ordinary start-up reads the store once and writes nothing. The store audits each raise as "renumber" by
// system:outbox-relay (detail: from, to and the reason, naming the bucket,
// version and relay); the relay logs it at warn level and counts it in
// governor_distribution_relay_renumbered_total. No version is renumbered,
// the audit chain is untouched, and the numbers skipped are never used.
//
// What an SRE sees: Plane.Undeliverable (the engine API and the web UI's
// undeliverable list) shows the versions the restored database made live
// before its numbering was raised (its approvals while the engine ran on
// the restored database without a restart, or outbox rows the backup still
// had pending) with reason "conflict" and an error naming the version the
// bucket holds; governor_distribution_relay_undeliverable_rows is above 0.
// The fleet keeps running the bucket's version meanwhile: nothing older
// and nothing in conflict reaches it.
//
// What to do, without SQL:
//
//  1. Decide which content the fleet should run. Versions the backup lost
//     are not in the store; the bucket's history still has their envelopes
//     (nats kv history <prefix>_rules <service token>.stable).
//  2. Roll back to the version wanted (Store.Rollback, the rollback of the
//     API or the web UI). A rollback creates a new version, now numbered
//     above the fleet's; it is published, the instances apply it, and it
//     supersedes the conflict records (the list empties). If the version
//     wanted is the store's active one, which cannot be rolled back to,
//     propose its content again and approve it; a new proposal is numbered
//     above the fleet's as well.
//  3. Withdraw the proposals that were open before the raise and propose
//     them again: they keep their numbers, at or below the fleet's, and
//     approving one would be another conflict.
//
// A relay whose first pass could not read the bucket or write the store
// (NATS or the database down) tries again at each pass; a version approved
// before it succeeds is listed as a conflict and handled as above.
//
// # Staged rollout
//
// Publisher.StartCanary writes a version to the service's canary key with a
// watch.Selector (a stable-hash percentage of instances and/or labels); only
// the selected instances apply it. Promote writes it to the stable key for
// everyone and removes the canary; Abort removes the canary and the canary
// instances return to the stable version. A Relay can stage every outbox row
// through a canary with Options.Stage.
//
// Canary versions only go forward, as stable ones do: StartCanary refuses
// (ErrStale) a version not newer than the stable one, the running canary or
// one staged before and aborted or promoted, so a relay retrying an old row,
// or taking over the row of a relay that died after staging it, never
// replaces a newer canary, stages an aborted one again or publishes either
// to every instance. Promote and Abort remove only the canary they read; a
// canary staged meanwhile stays. A canary a newer stable version overtook
// (a rollback) is not promoted: Promote fails with ErrStale and withdraws it.
//
// # Ledger
//
// Ledger consumes the ACK / NACK reports and heartbeats the SDK watchers
// (package governor.dev/governor/sdk/watch) publish, and keeps per service and
// instance a State: SYNCED (runs the version meant for it), PENDING (behind,
// within the grace period), STALE (behind for longer than the grace period),
// NACKED (refused the version, with the validation error), GONE (no
// heartbeat) or UNPUBLISHED (no version is meant for it: none was ever
// published for its service, e.g. a new service or a misspelt service
// name, or only a canary that does not select it is staged; it runs the
// SDK defaults, not approved rules, and its target is 0), with the history
// of transitions. An instance that says it runs a version while none is
// published for its service is UNPUBLISHED too, never SYNCED, with a
// transition detail naming the version it runs ("runs v3, but no version
// published for the service"). Instances are compared by
// version and, when the SDK reports it, by content: an instance that runs
// the version meant for it with a checksum other than the one the rules
// store has for that number (LedgerOptions.Checksum; the instance still
// runs the old content of a version published again after a restored
// rules store, its applier refused the new one) is NACKED, not SYNCED,
// with reason NackOtherContent ("other_content") and the error "runs
// other content of version N: checksum X, published Y" (followed by
// "; refused it: " and the instance's own NACK of the published content,
// when it sent one). Reports and heartbeats without checksums (SDKs older
// than the fields) are compared by version only, as before.
//
// SDKs and engines upgrade in either order: watch.DecodeReport and
// watch.DecodeHeartbeat ignore fields they do not know, so a ledger
// older than an SDK records its messages without the newer fields (see
// "Upgrade order" in sdk/watch). An instance turns GONE only
// when the ledger was able to hear it for the whole gone period: not while
// the ledger's NATS connection is down, nor until GoneAfter has passed since
// the ledger started, reconnected or last failed to record a message (the
// rules database was down), so an outage of the ledger's own does not make
// the whole fleet GONE. An instance GONE for longer
// than LedgerOptions.ForgetAfter (default 24h) is forgotten, its history
// kept: replaced pods and restarted processes come back under new ids. The
// history keeps LedgerOptions.TransitionRetention (default 30 days):
// sweeps delete older transitions in batches of at most 1000 rows (index of
// migration 00202), except each recorded instance's newest
// (governor_distribution_ledger_transitions_pruned_total). A sweep of
// Ledger.Run, and the store calls of Ledger.Published and Ledger.Aborted
// (the relay's, under a context without a deadline), are bounded by
// LedgerOptions.SweepTimeout (default 30s), as
// the recording of a batch of messages is by RecordTimeout, so a database that
// stops answering does not hold the ledger's loop; on SQLStore they write
// the instances they re-evaluate 512 to a transaction, not a commit each,
// and leave the unchanged ones unwritten. It
// persists through a LedgerStore: MemoryStore for tests and the dev stack,
// SQLStore on the rules database (PostgreSQL or SQLite, migrations
// 00200-00299). Ledger replicas
// (every engine instance runs one; they share the subjects in a queue
// group) update the same records, each by reading, changing and writing
// one: the write is a compare-and-set on the record as read, and a replica
// whose record another changed meanwhile reads it again and redoes its
// change (governor_distribution_ledger_conflicts_total), so no replica
// writes a stale copy over another's ACK, heartbeat or target. Reports and
// heartbeats arrive on separate subscriptions, so a heartbeat sent before an
// ACK may be handled after it: the ledger keeps, per instance, the time the
// instance sent its newest recorded message (Instance.MessageAt, migration
// 00201), and an older message (by at most GoneAfter; more is taken for the
// instance's clock stepping back) only refreshes the instance's liveness,
// not what it runs. A
// publication the ledger could not record keeps its outbox row, which the
// relay retries until the ledger knows; and every sweep moves a service's
// stable version up to the bucket's (LedgerOptions.Latest), which also
// repairs a promotion the ledger missed, and records the canary the bucket
// stages (LedgerOptions.Staged), which repairs a canary, a selector change
// or an abort the ledger missed (the Plane changes the bucket first and the
// ledger second, and a retry of the operation cannot tell the ledger).
// A ledger that stops (the context of Run ends) finishes the batch it is
// recording and drains: the server sends it no more messages, the other
// replicas take them, and it records the ones it had already taken
// within one more RecordTimeout, so a replica stopped in a rolling
// restart loses none of the ACKs and NACKs it took (what it cannot record
// in time is counted as dropped; heartbeats repair it, as they repair
// what is sent while no replica listens).
//
// # Wiring
//
// Plane puts the three together on one NATS connection, creates the bucket,
// runs the relay and the ledger, and offers StartCanary, Promote and Abort
// that keep the ledger's targets in step with the bucket:
//
//	plane, err := distribution.NewPlane(ctx, distribution.PlaneOptions{
//		Conn: nc, Outbox: store, Store: distribution.NewSQLStore(db),
//		Wake: distribution.ListenPostgres(ctx, distribution.ListenOptions{URL: url}),
//		Logger: logger, Registerer: reg,
//	})
//	go plane.Run(ctx)
//
// # Names and connections
//
// Bucket, keys and subjects derive from a prefix (watch.Names), so several
// installations or parallel tests can share a NATS account. ConnOptions
// carries the production connection settings: cluster URLs, user/password,
// NKey seed, JWT credentials file and TLS.
package distribution
