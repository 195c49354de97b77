package manager

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify/pagerduty"
)

// pdInOrder returns the PagerDuty actions in arrival order (pdActions sorts).
func (h *harness) pdInOrder() []string {
	var out []string
	for _, raw := range h.pd.take() {
		var e pagerduty.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e.EventAction)
	}
	return out
}

// An alert paged on PagerDuty resolves and fires again before the group
// interval lets the resolve out: the next message holds the old episode
// resolved and the new one firing, same fingerprint, same dedup_key. The
// resolve goes out before the trigger, so the incident of the firing alert
// ends open (in the other order PagerDuty would close it, and nothing would
// trigger it again before the P1 repeat an hour later).
func TestFlapLeavesPagerDutyIncidentOpen(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.routes = []dispatch.Route{{Receiver: "pd", Continue: true}, {Receiver: "hook"}}
	h.open()
	h.db.set("load", "checkout")
	h.at(0)
	h.at(30 * time.Second) // group wait: trigger
	if got := h.pdInOrder(); strings.Join(got, ",") != "trigger" {
		t.Fatalf("first page: %v", got)
	}
	h.db.set("load") // resolves at 45s; the resolve waits for the group interval (90s)
	h.at(45 * time.Second)
	h.db.set("load", "checkout") // fires again at 60s
	h.at(60 * time.Second)
	h.at(90 * time.Second)
	if got := h.pdInOrder(); strings.Join(got, ",") != "resolve,trigger" {
		t.Fatalf("PagerDuty events at 90s in order %v, want resolve,trigger", got)
	}
}
