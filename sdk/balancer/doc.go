// Package balancer spreads calls to one downstream over its endpoints with
// power-of-two-choices (P2C) and a peak-EWMA latency estimate.
//
// For each call Pick draws two endpoints at random and takes the one with the
// lower cost, latency estimate x (in-flight + 1). The estimate is
// peak-sensitive: a sample slower than the estimate replaces it at once, a
// faster one pulls it down with weight 1 - exp(-elapsed / Decay), and an idle
// endpoint's estimate decays toward zero over Decay, so a briefly slow
// endpoint gets traffic again. A failed call counts as twice the estimate,
// so a fast failure never makes an endpoint look fast, but failures alone
// raise the estimate no higher than Decay: however long an outage lasted, an
// endpoint that recovers is judged by its latency again within a few Decays.
// An endpoint without samples costs nothing while idle and a large penalty
// once it has a call in flight.
//
// A new endpoint starts slowly: for SlowStart after it was added, a pick that
// chose it keeps it only with probability age / SlowStart (at least 5%), so
// its share of traffic ramps up instead of a cold instance taking a
// stampede. With a breaker configured each endpoint has its own; an endpoint
// whose breaker is open is ejected (never picked) until its open period ends.
//
// Panic mode keeps ejection from taking the whole fleet out, as Envoy's
// healthy panic threshold does. When fewer than PanicThreshold (default 0.5;
// 0 turns it off) of the endpoints have a closed breaker, as when a
// dependency shared by all of them fails or an overload cascades, Pick
// ignores ejection and chooses among all endpoints by P2C as usual, instead
// of piling every call onto the few left or refusing every call. It applies
// to breakers of kind breaker only (a throttle never ejects, and what it
// rejects stays rejected). With a single endpoint any threshold above 0
// means its breaker never refuses a pick; the downstream's own breaker
// (sdk/outbound) still fails calls fast. The healthy count is kept per
// endpoint list and counted again only after a breaker changes state, so
// Pick does not scan the endpoints while the breakers are steady.
//
// Panic mode and half-open probes: a half-open endpoint counts as unhealthy
// (it admits only its probes), so a fleet whose open periods end together
// stays in panic mode until probes have closed enough breakers, rather than
// refusing every call but a few probes. In panic mode a picked endpoint's
// breaker is still asked first: once its open period is over, the call
// becomes its half-open probe and its outcome decides the breaker as usual.
// A call the breaker does not admit (still open, or every probe slot taken)
// goes to the endpoint without a ticket (Pick.Panic reports it, PanicPicks
// counts it): its latency and failure feed the estimate, but the breaker
// never sees it, so panic traffic can neither close an ejected endpoint's
// breaker early nor reopen or extend it. Ejection ends only through the
// breaker's own probes.
// A call that ends without an outcome (never made, or cancelled by its
// caller) is given back with Cancel rather than Done: it frees its in-flight
// count and any half-open probe slot and moves neither the estimate nor the
// breaker.
//
// Endpoints can be added and removed at any time (Update, Add, Remove); the
// state of the ones that stay is kept. A balancer rebuilt for a rule change
// takes over the endpoints of the one it replaces (Options.Inherit): with
// equal breaker rules the very same endpoints, breakers and ejections
// included; otherwise their estimates and slow-start ages, with fresh
// breakers.
package balancer
