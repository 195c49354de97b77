package signals

import "strings"

// InfoPrefix begins the warnings that say nothing about missing data: a
// backend's infos (promapi reports them as "info: ...") and the notes the
// signals packages add themselves (dropped native histogram samples,
// buckets with a bad le label, buckets made monotonic).
const InfoPrefix = "info: "

// PartialData reports whether a query warning says the answer may lack
// data. The rule is deliberately simple and errs towards "partial":
//
//   - Not partial: infos and the reader's own notes (InfoPrefix), and
//     PromQL annotations ("PromQL info: ...", "PromQL warning: ...", as
//     Prometheus, Thanos and Mimir word them). They describe the shape of the data the query saw (a
//     metric that might not be a counter, a mix of histograms and floats),
//     not which data it saw.
//   - Partial: everything else. Storage-layer warnings carry no common
//     wording (a Thanos partial response names the failing store, such as
//     "failed to receive any data from Addr: ...: context deadline
//     exceeded"; a remote read names the endpoint; a query limit names the
//     limit), so any warning that is not an annotation counts, including
//     "N more warning annotations omitted", which may hide one.
//
// A signal whose query answered with a partial-data warning reads as
// Partial for every key of the read: the warning does not say whose series
// are missing, and a key the answer lacks may be one of them.
func PartialData(warning string) bool {
	switch {
	case strings.HasPrefix(warning, InfoPrefix),
		strings.HasPrefix(warning, "PromQL info:"),
		strings.HasPrefix(warning, "PromQL warning:"):
		return false
	}
	return true
}

// firstPartial returns the first warning of ws that says data may be
// missing, or "".
func firstPartial(ws []string) string {
	for _, w := range ws {
		if PartialData(w) {
			return w
		}
	}
	return ""
}
