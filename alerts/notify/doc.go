// Package notify delivers group notifications to receivers. Each
// integration (webhook, alertmanager, pagerduty, slack, email) lives in its
// own subpackage and implements Notifier; Queue gives each receiver its own
// bounded queue and worker that retries with exponential back-off, so a
// receiver that keeps failing neither blocks the others nor loses silently:
// a full queue drops and counts. An attempt that delivered part of a
// message (ErrPartial), or that the Notifier held back without sending
// anything and named the time to try (ErrNotAttempted, bounded in all by
// QueueOptions.MaxDeferral), does not count against the attempts, and its
// wait gives way to a more urgent message queued meanwhile. Such waits
// leave the queue depth unchanged and fail nothing; the age of a
// receiver's oldest undelivered message
// (governor_alerts_notification_oldest_seconds) shows them.
package notify
