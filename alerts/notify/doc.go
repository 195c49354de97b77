// Package notify delivers group notifications to receivers. Each
// integration (webhook, alertmanager, pagerduty, slack, email) lives in its
// own subpackage and implements Notifier (FilterResolved applies the
// send_resolved setting of any of them); Queue gives each receiver its own
// bounded queue and worker that retries with exponential back-off, so a
// receiver that keeps failing neither blocks the others nor loses silently:
// a full queue drops and counts. An attempt that delivered part of a
// message (ErrPartial), or that the Notifier held back without sending
// anything and named the time to try (ErrNotAttempted, bounded in all by
// QueueOptions.MaxDeferral), does not count against the attempts, and its
// wait gives way to a more urgent message queued meanwhile. Such waits
// leave the queue depth unchanged and fail nothing; the age of a
// receiver's oldest undelivered message
// (governor_alerts_notification_oldest_seconds) shows them. A final
// failure of a message that reached part of its destinations
// (ErrDeliveredIncomplete, e.g. a mail refused for one recipient) is
// failed as any other, but its sender counts it as delivered and does not
// send it again.
//
// Order: a queue delivers the most urgent tier first, but a message never
// overtakes an earlier one of its group or of any of its alerts (by
// fingerprint, PagerDuty's dedup key): that one goes out first, so a
// receiver never gets an alert's resolve before its trigger, also when the
// alert is in several groups (routes that continue) or in a resend. A
// configuration change keeps the order too. The replaced queue is retired
// and keeps delivering what it accepted with the notifier that accepted
// it (nothing is handed over or lost), while the receiver's new queue
// (QueueOptions.Replaces) holds back a message of a group or alert that
// the retired queue still holds, delivering the others meanwhile, until
// the retired queue is done with it: delivered, given up or abandoned by
// Close. The depth and oldest-age series of a receiver cover all its
// running queues and go once none runs.
package notify
