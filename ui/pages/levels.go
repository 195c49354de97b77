package pages

import (
	"fmt"

	"governor.dev/governor/ui/model"
)

// levelRow is one signal's alert levels on a service page.
type levelRow struct {
	Signal, Warn, Critical, From, Baseline string
	// Learning: the levels wait for a conclusive baseline.
	Learning bool
}

// levelRows describes the engine's alert levels of a service for people:
// each level, where it comes from, and the baseline behind learned ones.
func levelRows(lvs []model.AlertLevel) []levelRow {
	out := make([]levelRow, 0, len(lvs))
	for _, lv := range lvs {
		name, format := "error ratio", fmtPct
		if lv.Signal == model.SignalLatencyP99 {
			name, format = "p99 latency", fmtSecs
		}
		row := levelRow{Signal: name, Warn: "none", Critical: "none", Learning: lv.Learned && lv.Baseline == nil}
		if lv.InForce {
			row.Warn, row.Critical = format(lv.Warn), format(lv.Critical)
		}
		row.From = levelOrigin(lv)
		switch {
		case !lv.Learned:
			row.Baseline = "not learned"
		case lv.Baseline != nil:
			row.Baseline = fmt.Sprintf("%s over %d healthy intervals", format(lv.Baseline), lv.Samples)
		case lv.Needed > 0:
			row.Baseline = fmt.Sprintf("learning: %d of %d healthy intervals", lv.Samples, lv.Needed)
		default:
			row.Baseline = fmt.Sprintf("learning: %d healthy intervals", lv.Samples)
		}
		out = append(out, row)
	}
	return out
}

// levelOrigin names where the levels come from: one origin for both, or
// each level's.
func levelOrigin(lv model.AlertLevel) string {
	name := func(from string) string {
		switch from {
		case "learned":
			return "learned from the healthy baseline"
		case "floor":
			return "the configured floor"
		case "configured":
			return "the engine's configuration"
		case "override":
			return "the service's own levels"
		}
		return from
	}
	switch {
	case !lv.InForce && lv.Learned:
		return "none until the baseline is conclusive"
	case !lv.InForce:
		return "none"
	case lv.WarnFrom == lv.CriticalFrom:
		return name(lv.WarnFrom)
	}
	return "warn: " + name(lv.WarnFrom) + "; critical: " + name(lv.CriticalFrom)
}
