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
// stampede. It loses the pick only to a sound endpoint, never to one
// ejected or with an open breaker (as panic mode may draw). An endpoint
// returning from an ejection starts slowly in the same way, as Envoy does
// for a host passing its health check again, so a just-recovered instance
// does not take its full share (and every queued retry) at once: from the
// end of a consecutive-failure ejection, or from the moment its breaker
// closes after an opening the ejection cap admitted. An endpoint whose open
// breaker was over the cap kept its calls and takes its full share again at
// once.
//
// Outlier ejection takes an endpoint out of rotation (never picked) in two
// ways. With a breaker configured (Options.Breaker) each endpoint has its
// own, and an endpoint whose breaker is open is ejected until its open
// period ends; the breaker's half-open probes then decide whether it
// closes. The open period doubles with every reopening up to the breaker's
// open_max (see sdk/breaker). With Ejection.ConsecutiveFailures set, as
// Envoy's consecutive_5xx, an endpoint whose calls fail that many times in
// a row is ejected for Ejection.BaseTime x the number of its recent
// ejections, up to Ejection.MaxTime, and returns when the time is up (each
// BaseTime back in rotation forgets one ejection). Both honour
// Ejection.MaxShare (default 0.1, as Envoy's max_ejection_percent, and at
// least one endpoint): an ejection that would take out more endpoints than
// that does not happen, so a fleet-wide problem cannot eject most of the
// fleet and overload the rest. An endpoint whose open breaker is over the
// cap keeps its share of calls, which go around its breaker as panic picks
// do (Pick.Panic); SkippedEjections counts the refused ejections and
// Ejected lists the ejected endpoints only.
//
// Panic mode keeps ejection from taking the whole fleet out, as Envoy's
// healthy panic threshold does. When fewer than PanicThreshold (default 0.5;
// 0 turns it off) of the endpoints have a closed breaker and no
// consecutive-failure ejection, as when a
// dependency shared by all of them fails or an overload cascades, Pick
// ignores ejection and chooses among all endpoints by P2C as usual, instead
// of piling every call onto the few left or refusing every call. As long as
// MaxShare is below 1 - PanicThreshold, ejected endpoints alone never bring
// it on: open breakers over the cap and half-open ones do. It applies to
// breakers of kind breaker and to
// consecutive-failure ejection only (a throttle never ejects, and what it
// rejects stays rejected; an endpoint whose throttle rejects a share of
// calls counts as healthy). With a single endpoint any threshold above 0
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
