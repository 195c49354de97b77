// Package manager runs the alerting pipeline: it evaluates the rules at each
// step, persists alert state and history, mutes silenced, inhibited and
// acknowledged alerts, lets the dispatcher decide what to notify, records
// each notification in the log before handing it to the receiver's queue,
// and raises an alert of its own when a receiver keeps failing: it gives up
// on notifications, or its full queue keeps dropping them.
//
// A restarted manager loads everything from the store, so it neither loses
// a firing or acknowledged alert nor sends a notification twice (one
// exception follows); messages
// logged but never delivered are queued again, or closed unsent when their
// receiver is no longer configured. A notification whose log entry cannot
// be written is still sent (at-least-once) and logged once the store is
// back (Manager.Lead says what a lead lost before that sends again).
//
// Engine replicas on one database each run a manager, and only the
// leader's sends: a manager made with Options.Standby sends nothing and
// refuses Step until Lead, which takes over the stored state and queues
// what the log holds undelivered; Standby, when the lead ends, stops its
// queues and leaves what they held in the log for the next leader.
//
// Reconfigure replaces routes, timing, inhibition and receivers between two
// steps, atomically: notifications already queued finish on the receivers
// that accepted them, and a receiver kept by name hears nothing from its new
// queue that must follow what its replaced queue still holds (a resolve
// never overtakes its trigger). UpdateRules replaces the rules.
//
// Step takes the evaluation time; Run calls it on a clock.
package manager
