// Package outbound holds a service's protection of its outbound calls: per
// downstream a circuit breaker (or adaptive throttle), a retry policy with its
// budget, a bulkhead and a balancer over the downstream's endpoints, built
// from the rules.Downstream entries of the ruleset in force.
//
// A Set is the registry, keyed by downstream name. Set.Apply takes the
// downstream rules of a new ruleset (the Governor calls it from its own Apply
// through the governor.DownstreamApplier interface; a Set also works on its
// own). It builds everything new before it swaps anything, so it either
// applies the whole list or changes nothing, and it keeps learned state: an
// unchanged downstream is kept as it is, and a changed one keeps each part
// whose rules did not change (breaker windows, the retry budget, the bulkhead
// and the balancer with its endpoint statistics).
//
// Each downstream's balancer ejects failing endpoints as its rules'
// balancer section says (rules.Balancer, mapped to balancer.Ejection):
// after consecutive_failures failed calls in a row, for base_ejection_time
// growing up to max_ejection_time, and through the endpoints' breakers when
// the downstream has breaker rules; max_ejection_percent (default 10) caps
// the share of endpoints ejected at once. A change of any balancer field
// rebuilds the balancer, which takes over the endpoints of the one it
// replaces with their estimates and consecutive-failure ejections, and
// with equal breaker rules their breakers.
//
// A downstream in shadow mode (rules.ModeShadow) evaluates its breaker and
// bulkhead and counts what they would refuse as shadow_would_reject, but
// refuses nothing. Its retry budget still applies: declining a retry never
// refuses a request, it only stops amplifying load.
//
// Transports (sdk/transport for net/http, the sdk/grpc module) drive a call
// through Downstream.Begin and Call.End, and retries through
// Downstream.Request, Downstream.NextRetry and Downstream.Wait (a retry is
// counted as attempted once its back-off ends). A call that ends without an
// outcome, because it was not made after all or because its caller cancelled
// it, ends with Call.Cancel instead: it gives back the bulkhead slot and the
// breaker's admission (a half-open probe slot, a throttle's request count)
// and counts neither a success nor a failure. Metrics follow
// docs/metrics.md: calls by outcome, call latency, breaker state, retries and
// retry budget use, bulkhead in-flight and cap, balanced endpoints by state,
// panic mode and ejections the cap refused.
// Every series exists from the moment its downstream is applied; the call
// path only adds to striped atomic counters, summed when Prometheus scrapes.
package outbound
