// Package dispatch turns the current alerts into notifications: it routes
// each alert by labels and tier to receivers (one route must catch every
// alert, as Alertmanager's root route does), groups alerts by labels, holds
// a new group for GroupWait, batches later changes by GroupInterval, repeats
// an unchanged firing group after the repeat interval of its tier (P0 5m,
// P1 1h, P2 daily and only within business hours) and reports resolves.
//
// What each group has notified lives in GroupState, which the caller
// persists together with the message (the notification log): a state change
// is notified once, also across restarts. Acknowledged alerts drop out of
// repeats until they resolve; muted alerts (silenced, inhibited) are not
// notified. Flush takes the time as an argument and is deterministic.
package dispatch
