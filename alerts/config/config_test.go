package config

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

const valid = `{
  "rules": [
    {"name": "CheckoutErrors", "expr": "sum(rate(governor_sdk_request_errors_total{service=\"checkout\"}[5m])) > 1",
     "severity": "P1", "for": "2m", "keep_firing_for": "5m", "annotations": {"summary": "errors"}},
    {"name": "GovernorLoadHigh", "expr": "governor_engine_load_score > 0.9", "severity": "P2", "for": "15m"}
  ],
  "routes": [
    {"receiver": "pager", "severities": ["P0"], "continue": true},
    {"receiver": "checkout", "matchers": "{service=\"checkout\"}", "group_by": ["alertname"]},
    {"receiver": "default"}
  ],
  "timing": {"group_wait": "10s", "group_interval": "1m", "repeat": {"P0": "10m"},
             "business_hours": {"start_hour": 8, "end_hour": 18, "location": "Europe/Paris"}, "p2_digest": true},
  "inhibit_rules": [{"source": "severity=\"P0\"", "target": "severity=~\"P1|P2\"", "equal": ["service"]}],
  "receivers": [
    {"name": "pager", "pagerduty": {"routing_key": "abc", "url": "http://127.0.0.1:9/v2/enqueue"}},
    {"name": "checkout", "slack": {"url": "https://hooks.example.com/x"}},
    {"name": "default", "webhook": {"url": "https://hooks.example.com/y"}},
    {"name": "am", "alertmanager": {"url": "http://am:9093"}},
    {"name": "mail", "email": {"smarthost": "mail:25", "from": "a@example.com", "to": ["b@example.com"]}}
  ]
}`

func TestParseValid(t *testing.T) {
	c, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	rs := c.RuleSet()
	var load, custom bool
	for _, r := range rs {
		if r.Name == "GovernorLoadHigh" {
			load = r.Severity == alerts.P2 && r.For == 15*time.Minute
		}
		if r.Name == "CheckoutErrors" {
			custom = r.KeepFiringFor == 5*time.Minute
		}
	}
	if !load || !custom {
		t.Fatalf("rule set: built-in not overridden (%v) or custom rule lost (%v)", load, custom)
	}
	tm := c.DispatchTiming().WithDefaults()
	if !tm.P2Digest || tm.GroupWait != 10*time.Second || tm.Repeat[alerts.P0] != 10*time.Minute || tm.Repeat[alerts.P1] != time.Hour {
		t.Fatalf("timing %+v", tm)
	}
	if !tm.BusinessHours.Contains(time.Date(2026, 3, 2, 7, 30, 0, 0, time.UTC)) { // 08:30 in Paris
		t.Fatal("business hours ignore the location")
	}
	ns, err := c.Notifiers(nil)
	if err != nil || len(ns) != 5 {
		t.Fatalf("notifiers %v %v", ns, err)
	}
	if !c.Routes[1].Matches(alerts.Labels{"service": "checkout"}) {
		t.Fatal("route matchers not parsed")
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"syntax with position", "{\n  \"receivers\": [,]\n}", "line 2, column 17"},
		{"unknown field", `{"receivers": [], "bogus": 1}`, `unknown field "bogus"`},
		{"bad promql with position", `{"rules": [{"name": "x", "expr": "rate(x[5m]", "severity": "P1"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "expr: position 10 (1:11)"},
		{"bad matcher with position", `{"routes": [{"receiver": "w", "matchers": "{a=\"b\" c}"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "position 7"},
		{"receiver url not http", `{"receivers": [{"name": "w", "webhook": {"url": "file:///tmp/x"}}]}`, `scheme "file": want http or https`},
		{"two integrations", `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}, "slack": {"url": "http://h/"}}]}`, "exactly one"},
		{"undefined receiver", `{"routes": [{"receiver": "nope"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, `receiver "nope" is not defined`},
		{"duplicate receiver", `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}, {"name": "w", "webhook": {"url": "http://h/"}}]}`, "used twice"},
		{"bad duration", `{"timing": {"group_wait": "soon"}, "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "duration"},
		{"bad repeat tier", `{"timing": {"repeat": {"P9": "1m"}}, "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "P9"},
		{"bad severity", `{"rules": [{"name": "x", "expr": "up", "severity": "high"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "severity"},
		{"bad business hours", `{"timing": {"business_hours": {"start_hour": 18, "end_hour": 8}}, "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "business_hours"},
		{"email password without username", `{"receivers": [{"name": "m", "email": {"smarthost": "mail:25", "from": "a@b.c", "to": ["d@e.f"], "password": "pw"}}]}`,
			"receivers[0] (m): alerts: invalid input: email: username: required with password"},
		{"no receivers", `{}`, "receivers: at least one"},
		{"trailing data", `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]} {}`, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte(`{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`))
	f.Add([]byte(`{"routes": [{"receiver": "w", "matchers": "{a=~\"(\"}"}]}`))
	f.Add([]byte(`{"timing": {"repeat": {"P0": "-1m"}}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"routes": [{"receiver": "w", "group_by": ["..."]}], "receivers": [{"name": "w", "slack": {"url": "http://h/", "send_resolved": false}}]}`))
	f.Add([]byte(`{"routes": [{"receiver": "w", "group_by": ["a", "..."], "matchers": "{a=~\"x)|(.*\"}"}]}`))
	f.Add([]byte(`{"rules": [{"name": "x", "for": "1q"}], "routes": [{"matchers": 1}], "timing": {"repeat": {"P0": "x"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, alerts.ErrInvalid) {
				t.Fatalf("error without the sentinel: %v", err)
			}
			return
		}
		if _, err := c.Notifiers(nil); err != nil {
			t.Fatalf("valid config does not build its receivers: %v", err)
		}
		if len(c.Routes) > 0 {
			if _, err := dispatch.New(c.Routes, c.DispatchTiming()); err != nil {
				t.Fatalf("valid config's routes are refused by the dispatcher: %v", err)
			}
		}
	})
}

// twoReceivers is the receivers part of a document with a pager and a
// webhook, for the tests below.
const twoReceivers = `"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}, {"name": "p", "pagerduty": {"routing_key": "k"}}]`

// An SRE writes routes for the pager (P0) and for one team's service and
// forgets the fallback: a P1 of another service would match no route and
// notify nobody, silently. As Alertmanager insists on a root route with a
// receiver, the document is refused, naming the routes and the fix.
func TestParseRefusesRoutesThatLeaveAlertsUnrouted(t *testing.T) {
	doc := `{"routes": [{"receiver": "p", "severities": ["P0"], "continue": true},
	  {"receiver": "w", "matchers": "{service=\"checkout\"}"}], ` + twoReceivers + `}`
	_, err := Parse([]byte(doc))
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "routes: no route catches every alert") {
		t.Fatalf("Parse() = %v, want an invalid-input error naming routes", err)
	}
	// A catch-all anywhere is enough: alerts an earlier route took without
	// continue are routed there, the others reach it.
	for _, routes := range []string{
		`[{"receiver": "p", "severities": ["P0"]}, {"receiver": "w"}]`,
		`[{"receiver": "p", "continue": true}, {"receiver": "w", "matchers": "{service=\"checkout\"}"}]`,
	} {
		if _, err := Parse([]byte(`{"routes": ` + routes + `, ` + twoReceivers + `}`)); err != nil {
			t.Errorf("routes %s refused: %v", routes, err)
		}
	}
}

// A document followed by anything but white space is refused, a stray
// closing brace or bracket included (an editing slip that json.Decoder.More
// does not report): the part after it might be what the author meant.
func TestParseRefusesTrailingDataAfterTheDocument(t *testing.T) {
	doc := `{` + twoReceivers + `, "routes": [{"receiver": "w"}]}`
	for _, trailing := range []string{" }", "]", "\n{}", " x"} {
		_, err := Parse([]byte(doc + trailing))
		if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "trailing data") {
			t.Errorf("document followed by %q: %v, want an invalid-input error about trailing data", trailing, err)
		}
	}
	if _, err := Parse([]byte(doc + " \n\t")); err != nil {
		t.Fatalf("document followed by white space: %v", err)
	}
}

// An explicit "0s" is never replaced by the default: where zero has no
// meaning (a group interval or repeat interval of zero would notify at every
// step; an event rule that resolves at once never fires) it is refused,
// naming the field, instead of silently running with 5m, 1h or 15m.
func TestParseRefusesZeroIntervalsWithoutMeaning(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"group_interval", `{"timing": {"group_interval": "0s"}, ` + twoReceivers + `, "routes": [{"receiver": "w"}]}`,
			"timing.group_interval: must be positive"},
		{"repeat", `{"timing": {"repeat": {"P0": "5m", "P1": "0m"}}, ` + twoReceivers + `, "routes": [{"receiver": "w"}]}`,
			"timing.repeat.P1: must be positive"},
		{"resolve_after", `{"rules": [{"name": "Down", "event": "down", "severity": "P1", "resolve_after": "0s"}], ` + twoReceivers +
			`, "routes": [{"receiver": "w"}]}`, "rules[0] (Down): resolve_after: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, tt.want)
			}
		})
	}
}

// group_wait "0s" means what it says, as in Alertmanager: a new group
// notifies at the first flush, not after the default 30s. The literal zero
// survives a round trip through the document (the engine shows the
// bootstrap file re-encoded), and an omitted group_wait still takes 30s.
func TestParseGroupWaitZeroNotifiesAtOnce(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a := alerts.Alert{Labels: alerts.Labels{"alertname": "X", "service": "a", "severity": "P1"}, StartsAt: t0}
	firstFlush := func(t *testing.T, c *Config) int {
		t.Helper()
		d, err := dispatch.New(c.Routes, c.DispatchTiming())
		if err != nil {
			t.Fatal(err)
		}
		return len(d.Flush(t0, []alerts.Alert{a}, dispatch.Filter{}))
	}
	c, err := Parse([]byte(`{"timing": {"group_wait": "0s"}, ` + twoReceivers + `, "routes": [{"receiver": "w"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := firstFlush(t, c); n != 1 {
		t.Fatalf("group_wait 0s: %d notifications at the first flush, want 1", n)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if n := firstFlush(t, back); n != 1 || !strings.Contains(string(b), `"group_wait":"0s"`) {
		t.Fatalf("after a round trip (%s): %d notifications at the first flush, want 1", b, n)
	}
	omitted, err := Parse([]byte(`{` + twoReceivers + `, "routes": [{"receiver": "w"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := firstFlush(t, omitted); n != 0 || omitted.DispatchTiming().WithDefaults().GroupWait != 30*time.Second {
		t.Fatalf("group_wait omitted: %d notifications at the first flush, want 0 (30s wait)", n)
	}
}

// A duration or a list of matchers that does not parse is refused with the
// line, column and path of its field: encoding/json reports only the
// value's own error ("time: unknown unit "q" in duration "5q""), and in a
// document with dozens of durations nobody knows which one.
func TestParseNamesTheFieldOfARefusedValue(t *testing.T) {
	const recv = `"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]`
	tests := []struct{ name, doc, want string }{
		{"rule for", "{\"rules\": [{\"name\": \"a\", \"expr\": \"up\"},\n {\"name\": \"b\", \"expr\": \"up\", \"for\": \"5q\"}],\n " + recv + "}",
			`line 2, column 37: rules[1].for: time: unknown unit "q"`},
		{"route matchers", `{"routes": [{"receiver": "w"}, {"receiver": "w", "matchers": "{a=\"b\""}], ` + recv + `}`,
			"line 1, column 62: routes[1].matchers: alerts: invalid input: matchers: position 6"},
		{"group wait", `{"timing": {"group_wait": "soon"}, ` + recv + `}`, `timing.group_wait: time: invalid duration "soon"`},
		{"repeat", `{"timing": {"repeat": {"P1": "1x"}}, ` + recv + `}`, "timing.repeat.P1: "},
		{"inhibit source", `{"inhibit_rules": [{"source": "a=~\"(\"", "target": "b=\"c\""}], ` + recv + `}`, "inhibit_rules[0].source: "},
		{"key case as encoding/json", `{"Timing": {"Group_Interval": "-1m"}, ` + recv + `}`, `Timing.Group_Interval: duration "-1m" is negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, tt.want)
			}
		})
	}
}

// A repeat interval below group_interval is accepted, as Alertmanager
// accepts it: the group repeats every group_interval (the manager logs a
// warning). Refusing it would refuse "group_interval": "10m" alone, as the
// default P0 repeat is 5m.
func TestParseAcceptsRepeatBelowGroupInterval(t *testing.T) {
	c, err := Parse([]byte(`{"timing": {"group_interval": "10m", "repeat": {"P1": "2m"}}, ` + twoReceivers + `, "routes": [{"receiver": "w"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := c.DispatchTiming().WithDefaults().ShortRepeats()
	if len(got) != 2 || got[0] != alerts.P0 || got[1] != alerts.P1 {
		t.Fatalf("tiers repeating every group_interval: %v, want [P0 P1]", got)
	}
}

// A repeat interval below the group interval is accepted (it acts as the
// group interval, as in Alertmanager), and the parsed document says so, for
// the person editing it: each such tier with both intervals, a default
// marked as such. The shipped timing warns about nothing.
func TestRepeatBelowGroupIntervalIsAWarningNotAnError(t *testing.T) {
	c, err := Parse([]byte(`{"timing": {"group_interval": "2h", "repeat": {"P1": "90m"}},
	  "receivers": [{"name": "w", "webhook": {"url": "https://hooks.example.com/y"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"timing.repeat.P0: 5m0s (the default) is below timing.group_interval 2h0m0s: P0 groups repeat every 2h0m0s",
		"timing.repeat.P1: 1h30m0s is below timing.group_interval 2h0m0s: P1 groups repeat every 2h0m0s",
	}
	if got := c.Warnings(); !slices.Equal(got, want) {
		t.Fatalf("warnings %q, want %q", got, want)
	}
	c, err = Parse([]byte(`{"timing": {"repeat": {"P0": "1m"}}, "receivers": [{"name": "w", "webhook": {"url": "https://hooks.example.com/y"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Warnings(), []string{"timing.repeat.P0: 1m0s is below timing.group_interval 5m0s (the default): P0 groups repeat every 5m0s"}; !slices.Equal(got, want) {
		t.Fatalf("warnings %q, want %q", got, want)
	}
	c, err = Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Warnings(); got == nil || len(got) != 0 {
		t.Fatalf("warnings %#v, want an empty list", got)
	}
}

// TestSendResolvedFalseAppliesToEveryReceiverKind: send_resolved false,
// applied once where the receivers are built, keeps resolve-only messages
// from a receiver of any kind and hands it the firing alerts of a group
// that has both; omitted, resolves are sent.
func TestSendResolvedFalseAppliesToEveryReceiverKind(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	posted := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := bodies
		bodies = nil
		return out
	}
	tests := []struct {
		kind, receiver string
		// mailed: the receiver sends mail, to a relay that is not there,
		// so only what must not be sent at all is tried.
		mailed bool
	}{
		{kind: "webhook", receiver: `{"url": "` + srv.URL + `"`},
		{kind: "slack", receiver: `{"url": "` + srv.URL + `"`},
		{kind: "pagerduty", receiver: `{"routing_key": "rk", "url": "` + srv.URL + `"`},
		{kind: "email", receiver: `{"smarthost": "127.0.0.1:1", "from": "a@governor.test", "to": ["b@governor.test"]`, mailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			doc := `{"routes": [{"receiver": "quiet", "continue": true}, {"receiver": "loud"}], "receivers": [
			  {"name": "quiet", "` + tt.kind + `": ` + tt.receiver + `, "send_resolved": false}},
			  {"name": "loud", "` + tt.kind + `": ` + tt.receiver + `}}]}`
			c, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			ns, err := c.Notifiers(srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, n := range ns {
					if cl, ok := n.(notify.Closer); ok {
						cl.Close()
					}
				}
			}()
			ctx := context.Background()
			if retry, err := ns["quiet"].Notify(ctx, notifytest.SampleResolved(notify.KindNotify)); retry || err != nil || len(posted()) != 0 {
				t.Fatalf("send_resolved false, resolved-only message: retry %v, err %v", retry, err)
			}
			if tt.mailed {
				return
			}
			if _, err := ns["quiet"].Notify(ctx, notifytest.Sample(notify.KindNotify)); err != nil {
				t.Fatal(err)
			}
			if got := posted(); len(got) != 1 || strings.Contains(got[0], "resolve") || !strings.Contains(got[0], "Shed") {
				t.Fatalf("send_resolved false, mixed message: sent %q, want the firing alert only", got)
			}
			if _, err := ns["loud"].Notify(ctx, notifytest.SampleResolved(notify.KindNotify)); err != nil || len(posted()) != 1 {
				t.Fatalf("send_resolved omitted: err %v, resolve not sent", err)
			}
		})
	}
	// Alertmanager must hear of resolves; it has its own send_resolved.
	_, err := Parse([]byte(`{"receivers": [{"name": "am", "alertmanager": {"url": "http://am:9093", "send_resolved": false}}]}`))
	if want := `receivers[0] (am): alerts: invalid input: alertmanager: send_resolved false is not supported`; !errors.Is(err, alerts.ErrInvalid) ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("Parse() = %v, want an error containing %q", err, want)
	}
}
