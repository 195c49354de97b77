package report

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable prints one run as a Markdown table.
func WriteTable(w io.Writer, r Run) {
	fmt.Fprintf(w, "%s (%s, capacity %.0f rps)\n\n", r.Scenario, r.Mode, r.CapacityRPS)
	fmt.Fprintln(w, "| limiter | goodput rps | goodput ratio | p50 ms | p99 ms | critical | core | browse | batch | shed | wasted | recovery s | attempts/req |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Results {
		fmt.Fprintf(w, "| %s | %.1f | %.3f | %.1f | %.1f | %s | %s | %s | %s | %.3f | %.3f | %.1f | %.2f |\n",
			x.Limiter, x.GoodputRPS, x.GoodputRatio, x.P50ms, x.P99ms,
			pct(x.ClassSuccess["critical"]), pct(x.ClassSuccess["core"]), pct(x.ClassSuccess["browse"]), pct(x.ClassSuccess["batch"]),
			x.ShedRatio, x.WastedRatio, x.RecoveryS, x.Detail.Amplification)
	}
	fmt.Fprintln(w)
}

func pct(x float64) string {
	s := fmt.Sprintf("%.2f%%", 100*x)
	return strings.Replace(s, "100.00%", "100%", 1)
}
