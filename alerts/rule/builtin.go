package rule

import (
	"time"

	"governor.dev/governor/alerts"
)

// Builtin returns the rules Governor ships enabled. PromQL rules read the
// SDK series of docs/metrics.md and the engine's governor_engine_load_score;
// event rules listen to the engine's conditions.
func Builtin() []Rule {
	runbook := func(name string) map[string]string {
		return map[string]string{"runbook_url": "https://governor.dev/runbooks/alerts#" + name}
	}
	ann := func(name, summary, description string) map[string]string {
		m := runbook(name)
		m["summary"] = summary
		m["description"] = description
		return m
	}
	// Shadow outcomes count a request a second time, so the denominator
	// leaves them out.
	const critShed = `sum by (service) (rate(governor_sdk_requests_total{class="critical",outcome=~"shed|rate_limited|queue_timeout|overload"}[5m]))` +
		` / sum by (service) (rate(governor_sdk_requests_total{class="critical",outcome!~"shadow_.*"}[5m])) > 0.001`
	return []Rule{
		{Name: "GovernorLoadHigh", Expr: `governor_engine_load_score > 0.8`, Severity: alerts.P1,
			For: 10 * time.Minute, KeepFiringFor: 5 * time.Minute,
			Annotations: ann("GovernorLoadHigh", `{{ $labels.service }} load score above the act level`,
				`Smoothed load score {{ $value }} has stayed above 0.8 for 10 minutes.`)},
		{Name: "GovernorCriticalShed", Expr: critShed, Severity: alerts.P0, For: 2 * time.Minute,
			Annotations: ann("GovernorCriticalShed", `{{ $labels.service }} is refusing critical traffic`,
				`Ratio {{ $value }} of critical requests shed, rate limited, timed out in the queue or refused by the overload throttle (above 0.1%).`)},
		{Name: "GovernorBreakerOpen", Expr: `count by (service, downstream) (governor_sdk_breaker_state == 2) == 1`,
			Severity: alerts.P2, For: time.Minute,
			Annotations: ann("GovernorBreakerOpen", `{{ $labels.service }} breaker to {{ $labels.downstream }} open`,
				`One instance has held its breaker open for more than a minute.`)},
		{Name: "GovernorBreakerOpenFleet", Expr: `count by (service, downstream) (governor_sdk_breaker_state == 2) > 1`,
			Severity: alerts.P1, For: time.Minute,
			Annotations: ann("GovernorBreakerOpenFleet", `{{ $labels.service }} breakers to {{ $labels.downstream }} open on several instances`,
				`{{ $value }} instances have held their breaker open for more than a minute.`)},
		{Name: "GovernorInstanceStale", Event: EventInstanceStale, Severity: alerts.P1,
			Annotations: ann("GovernorInstanceStale", `{{ $labels.service }} instance {{ $labels.instance }} is stale on the latest rule version`, ``)},
		{Name: "GovernorInstanceNacked", Event: EventInstanceNacked, Severity: alerts.P1,
			Annotations: ann("GovernorInstanceNacked", `{{ $labels.service }} instance {{ $labels.instance }} refused the latest rule version`, ``)},
		{Name: "GovernorAutoRollback", Event: EventAutoRollback, Severity: alerts.P1, ResolveAfter: time.Hour,
			Annotations: ann("GovernorAutoRollback", `{{ $labels.service }}: a guardrail rolled back a rule change`, ``)},
		{Name: "GovernorEmergencyPublish", Event: EventEmergencyPublish, Severity: alerts.P1, ResolveAfter: time.Hour,
			Annotations: ann("GovernorEmergencyPublish", `{{ $labels.service }}: rules were published in emergency mode`, ``)},
		// Only a leader evaluates rules, so no built-in rule can say that
		// no replica leads (alerts/README.md: alert on the same series from
		// a Prometheus outside the engine). This one fires on a leader that
		// claims no tick: its claims fail, or nothing runs them.
		{Name: TicksStalledRule, Expr: ticksStalled, Severity: alerts.P1, For: time.Minute,
			Annotations: ann(TicksStalledRule, `The decision engine has evaluated nothing for {{ printf "%.0f" $value }}s`,
				`No replica has claimed an evaluation tick for more than three tick intervals (at least 30s): `+
					`the leader's claims fail (its log says why: clock skew, a read-only database) or its cycles do not run. `+
					`Meanwhile no rule is adapted and no guardrail rolls a change back.`)},
		ReceiverFailing(),
		// A notification held back by its receiver (PagerDuty's pacing, a
		// long Retry-After) fails nothing for up to the queue's max
		// deferral, so the rule above stays quiet while a page is late.
		{Name: ReceiverDelayedRule, Expr: `max by (receiver) (governor_alerts_notification_oldest_seconds) > 600`,
			Severity: alerts.P1,
			Annotations: ann(ReceiverDelayedRule, `Notifications to {{ $labels.receiver }} are delayed`,
				`The oldest undelivered notification to {{ $labels.receiver }} was queued {{ printf "%.0f" $value }}s ago (over 10 minutes): `+
					`its receiver holds it back or keeps failing it; the pages it carries are late.`)},
		{Name: "GovernorSignalAboveLevel", Event: EventAlertLevel, For: 5 * time.Minute, ResolveAfter: 5 * time.Minute,
			Annotations: ann("GovernorSignalAboveLevel", `{{ $labels.service }}: {{ $labels.signal }} above its {{ $labels.level }} alert level`,
				`The engine has seen {{ $labels.signal }} above the {{ $labels.level }} level for 5 minutes (P1 critical, P2 warn).`)},
		{Name: "GovernorAnomaly", Event: EventAnomaly,
			Annotations: ann("GovernorAnomaly", `{{ $labels.service }}: {{ $labels.signal }} crossed its anomaly threshold`, ``)},
	}
}

// TicksStalledRule names the built-in rule that alerts, on the leader, when
// no replica has claimed an evaluation tick for three tick intervals (at
// least 30s). It reads the elector's series of every replica
// (governor_engine_leader_last_tick_timestamp_seconds and
// governor_engine_tick_interval_seconds, package engine/leader) through the
// query function, so it needs the engine's own /metrics in the metrics
// source. It replaces the former built-in event rule GovernorLeaderLost,
// which could not say that ticks stop (only a leader evaluates, and the next
// leader's leader_acquired clears the leader_lost of the one before) and,
// with the replicas' clocks apart, fired while a replica led.
const TicksStalledRule = "GovernorEngineTicksStalled"

// ticksStalled is the age of the newest claimed tick when it was last
// scraped, on the replica that saw the newest: timestamp() rather than
// time(), so that the scrape interval adds no false lag.
const ticksStalled = `min(timestamp(governor_engine_leader_last_tick_timestamp_seconds) - governor_engine_leader_last_tick_timestamp_seconds)` +
	` > clamp_min(3 * max(governor_engine_tick_interval_seconds), 30)`

// ReceiverDelayedRule names the built-in rule that alerts on a receiver
// whose oldest undelivered notification has waited more than 10 minutes.
// It reads the manager's governor_alerts_notification_oldest_seconds
// through the query function, so it needs the engine's own /metrics in the
// metrics source, as GovernorLoadHigh does.
const ReceiverDelayedRule = "GovernorAlertReceiverDelayed"

// ReceiverFailingRule names the rule that alerts on a failing receiver.
const ReceiverFailingRule = "GovernorAlertReceiverFailing"

// ReceiverFailing is the rule the manager always runs: a receiver that gave
// up on a notification raises a P1 until it delivers again, and so does one
// whose full queue keeps dropping notifications, until it keeps up again.
func ReceiverFailing() Rule {
	return Rule{Name: ReceiverFailingRule, Event: EventReceiverFailing, Severity: alerts.P1, ResolveAfter: 24 * time.Hour,
		Annotations: map[string]string{"summary": `Alert receiver {{ $labels.receiver }} is failing`,
			"description": `Notifications to {{ $labels.receiver }} are given up after every retry, or keep being dropped on its full queue; other receivers still get them.`,
			"runbook_url": "https://governor.dev/runbooks/alerts#GovernorAlertReceiverFailing"}}
}
