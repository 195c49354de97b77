package pagerduty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
	"governor.dev/governor/sdk/clock"
)

// firingGroup returns n firing P0 alerts with distinct fingerprints.
func firingGroup(n int) []notify.Alert {
	var as []notify.Alert
	for i := range n {
		l := alerts.Labels{"alertname": "X", "service": fmt.Sprint("svc-", i), "severity": "P0"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	return as
}

// limitedPD is a PagerDuty that accepts tokens events, then answers 429.
type limitedPD struct {
	mu     sync.Mutex
	tokens int
	got    []Event
	// onEvent runs for every request, before the answer.
	onEvent func(Event)
}

func (p *limitedPD) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e Event
	_ = json.NewDecoder(r.Body).Decode(&e)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onEvent != nil {
		p.onEvent(e)
	}
	if p.tokens == 0 {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	p.tokens--
	p.got = append(p.got, e)
	w.WriteHeader(http.StatusAccepted)
}

func (p *limitedPD) refill(tokens int) []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got
	p.tokens, p.got = tokens, nil
	return got
}

func TestEventsV2(t *testing.T) {
	got := make(chan Event, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			t.Error(err)
		}
		got <- e
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n, err := New(Config{RoutingKey: "rk", URL: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	msg := notifytest.Sample(notify.KindNotify)
	if _, err := n.Notify(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	trig, res := <-got, <-got
	if trig.EventAction != "trigger" || trig.Payload.Severity != "critical" || trig.DedupKey != msg.Alerts[0].Fingerprint ||
		trig.RoutingKey != "rk" || trig.Payload.Summary != "Shed on checkout" {
		t.Fatalf("trigger %+v %+v", trig, trig.Payload)
	}
	if res.EventAction != "resolve" || res.DedupKey != msg.Alerts[1].Fingerprint || res.Payload != nil {
		t.Fatalf("resolve %+v", res)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindAcknowledge)); err != nil {
		t.Fatal(err)
	}
	if ack := <-got; ack.EventAction != "acknowledge" {
		t.Fatalf("ack %+v", ack)
	}
	<-got
}

func TestSeverityAndConfig(t *testing.T) {
	for s, want := range map[alerts.Severity]string{alerts.P0: "critical", alerts.P1: "error", alerts.P2: "warning"} {
		if SeverityOf(s) != want {
			t.Fatalf("%s -> %s", s, SeverityOf(s))
		}
	}
	if _, err := New(Config{}, nil); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatal("missing routing key accepted")
	}
	if _, err := New(Config{RoutingKey: "k", URL: "gopher://x"}, nil); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatal("bad url accepted")
	}
}

func TestLongSummaryIsTruncatedToPagerDutyLimit(t *testing.T) {
	n, err := New(Config{RoutingKey: "rk"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := notifytest.Sample(notify.KindNotify)
	m.Alerts[0].Annotations = map[string]string{"summary": strings.Repeat("é", 3000)}
	ev := n.Build(m)[0]
	if c := utf8.RuneCountInString(ev.Payload.Summary); c > 1024 {
		t.Fatalf("summary has %d characters, PagerDuty refuses more than 1024", c)
	}
}

// A retry sends only the events PagerDuty has not accepted yet: under its
// rate limit (3 events per window here), resending the accepted ones used
// up every window and the message never got through.
func TestRetrySendsOnlyEventsNotAcceptedYet(t *testing.T) {
	var mu sync.Mutex
	tokens := 3
	var got []Event
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		_ = json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		defer mu.Unlock()
		if tokens == 0 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		tokens--
		got = append(got, e)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n := fakeNotifier(t, clock.NewFake(time.Time{}), srv) // pacing waits advance its clock
	var as []notify.Alert
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		l := alerts.Labels{"alertname": "X", "service": s, "severity": "P0"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	for attempt := 1; attempt <= 3; attempt++ {
		retry, err := n.Notify(context.Background(), m)
		if err == nil {
			break
		}
		if !retry {
			t.Fatal(err)
		}
		if attempt == 3 {
			t.Fatalf("no progress across attempts: %v", err)
		}
		mu.Lock()
		tokens = 3 // the next window
		mu.Unlock()
	}
	if len(got) != 5 {
		t.Fatalf("%d events accepted, want 5", len(got))
	}
}

// After a failed event, the later events of the same alert wait for the
// retry: PagerDuty gets the old episode's resolve before the new trigger.
func TestFailedEventHoldsLaterEventsOfTheSameAlert(t *testing.T) {
	var mu sync.Mutex
	fail := true
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		_ = json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		defer mu.Unlock()
		if e.EventAction == "resolve" && fail {
			fail = false
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		got = append(got, e.EventAction)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n := fakeNotifier(t, clock.NewFake(time.Time{}), srv) // pacing waits advance its clock
	l := alerts.Labels{"alertname": "X", "service": "a", "severity": "P0"}
	fp := l.Fingerprint().String()
	t0 := notifytest.Sample(notify.KindNotify).CreatedAt
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, []notify.Alert{
		{Alert: alerts.Alert{Labels: l, StartsAt: t0, EndsAt: t0}, Status: notify.StatusResolved, Fingerprint: fp},
		{Alert: alerts.Alert{Labels: l, StartsAt: t0.Add(1)}, Status: notify.StatusFiring, Fingerprint: fp},
	}, t0)
	if retry, err := n.Notify(context.Background(), m); err == nil || !retry {
		t.Fatalf("retry %v err %v", retry, err)
	}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "resolve,trigger" {
		t.Fatalf("PagerDuty got %v, want the resolve before the new trigger", got)
	}
}

// A 429 ends the attempt: the later events of the message would be refused
// too and use up PagerDuty's window again. The error carries PagerDuty's
// Retry-After for the queue, and the retry sends the events not accepted.
func TestRateLimitEndsTheAttempt(t *testing.T) {
	var mu sync.Mutex
	limited := true
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		if limited {
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n := fakeNotifier(t, clock.NewFake(time.Time{}), srv) // pacing waits advance its clock
	var as []notify.Alert
	for _, s := range []string{"a", "b", "c"} {
		l := alerts.Labels{"alertname": "X", "service": s, "severity": "P0"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	retry, err := n.Notify(context.Background(), m)
	var se *notify.StatusError
	if !retry || !errors.As(err, &se) || se.Wait(time.Time{}) != 20*time.Second {
		t.Fatalf("retry %v, err %v: want a retry with PagerDuty's Retry-After of 20s", retry, err)
	}
	mu.Lock()
	if requests != 1 {
		t.Fatalf("%d requests in the rate-limited attempt, want 1", requests)
	}
	limited, requests = false, 0
	mu.Unlock()
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 3 {
		t.Fatalf("%d events sent by the retry, want 3", requests)
	}
}

// The manager re-sends a group's state in a new message after the queue
// gave up on it: the events PagerDuty accepted the first time are not sent
// again, or a group larger than PagerDuty's rate limit never got through.
// Once the state was delivered whole, a repeat sends every event again.
func TestResendOfSameGroupStateSkipsEventsAlreadyAccepted(t *testing.T) {
	pd := &limitedPD{tokens: 3}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	n := fakeNotifier(t, clock.NewFake(time.Time{}), srv) // pacing waits advance its clock
	t0 := notifytest.Sample(notify.KindNotify).CreatedAt
	retry, err := n.Notify(context.Background(), notify.NewMessage(notify.KindNotify, "pd", "k", nil, firingGroup(5), t0))
	if !retry || !errors.Is(err, notify.ErrPartial) {
		t.Fatalf("retry %v err %v: want a partial delivery", retry, err)
	}
	if got := pd.refill(10); len(got) != 3 {
		t.Fatalf("%d events accepted, want 3", len(got))
	}
	if _, err := n.Notify(context.Background(), notify.NewMessage(notify.KindNotify, "pd", "k", nil, firingGroup(5), t0)); err != nil {
		t.Fatal(err)
	}
	if got := pd.refill(10); len(got) != 2 {
		t.Fatalf("the re-send sent %d events, want the 2 not accepted yet", len(got))
	}
	// Delivered whole: a repeat of the same state sends every trigger.
	if _, err := n.Notify(context.Background(), notify.NewMessage(notify.KindNotify, "pd", "k", nil, firingGroup(5), t0)); err != nil {
		t.Fatal(err)
	}
	if got := pd.refill(10); len(got) != 5 {
		t.Fatalf("the repeat sent %d events, want 5", len(got))
	}
}

// A changed event (here a new label value) of an alert whose earlier
// trigger was accepted is sent again, and so is a resolve.
func TestResendSendsEventsWhoseContentOrActionChanged(t *testing.T) {
	pd := &limitedPD{tokens: 1}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	n := fakeNotifier(t, clock.NewFake(time.Time{}), srv) // pacing waits advance its clock
	t0 := notifytest.Sample(notify.KindNotify).CreatedAt
	as := firingGroup(2)
	if _, err := n.Notify(context.Background(), notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, t0)); err == nil {
		t.Fatal("want a 429")
	}
	pd.refill(10)
	as = firingGroup(2)
	as[0].Annotations = map[string]string{"summary": "worse"}
	if _, err := n.Notify(context.Background(), notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, t0)); err != nil {
		t.Fatal(err)
	}
	if got := pd.refill(10); len(got) != 2 || got[0].Payload.Summary != "worse" {
		t.Fatalf("PagerDuty got %+v, want the changed trigger and the one not accepted", got)
	}
}

// A resolve is sent although its trigger was never accepted: PagerDuty
// ignores a resolve for an unknown dedup key, and the trigger may have
// reached it without the answer reaching us.
func TestResolveIsSentEvenIfTheTriggerWasNeverAccepted(t *testing.T) {
	var mu sync.Mutex
	var got []string
	fail := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		_ = json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		defer mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		got = append(got, e.EventAction)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n := fakeNotifier(t, clock.NewFake(time.Time{}), srv) // pacing waits advance its clock
	t0 := notifytest.Sample(notify.KindNotify).CreatedAt
	as := firingGroup(1)
	if retry, err := n.Notify(context.Background(), notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, t0)); !retry || err == nil ||
		errors.Is(err, notify.ErrPartial) {
		t.Fatalf("retry %v err %v: want a retryable failure without progress", retry, err)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	as[0].Status, as[0].EndsAt = notify.StatusResolved, t0
	if _, err := n.Notify(context.Background(), notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, t0)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "resolve" {
		t.Fatalf("PagerDuty got %v, want the resolve", got)
	}
}

// An attempt stops before its deadline, when the next event would not fit
// in the time left, and reports its progress (notify.ErrPartial): the
// queue's timeout does not eat it, and the next attempt goes on from there.
func TestAttemptStopsBeforeItsDeadlineAndTheNextGoesOn(t *testing.T) {
	start := time.Now().Add(time.Hour) // the context's deadline never passes in real time
	f := clock.NewFake(start)
	pd := &limitedPD{tokens: 100, onEvent: func(Event) { f.Advance(time.Second) }}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	n := fakeNotifier(t, f, srv)
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, firingGroup(25), start)
	var total int
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
		retry, err := n.Notify(ctx, m)
		cancel()
		got := len(pd.refill(100))
		total += got
		if err == nil {
			break
		}
		if !retry || !errors.Is(err, notify.ErrPartial) || got == 0 || got >= 10 {
			t.Fatalf("attempt %d: retry %v, %d events, err %v: want progress within the 10s deadline", attempt, retry, got, err)
		}
		if attempt > 5 {
			t.Fatal("no end")
		}
	}
	if total != 25 {
		t.Fatalf("%d events accepted over the attempts, want 25", total)
	}
}

// An event over PagerDuty's 512 KB limit gets a final 400: its
// custom_details values are cut until it fits, and it says how much.
func TestOversizedEventIsCutToPagerDutyLimit(t *testing.T) {
	n, _ := New(Config{RoutingKey: "rk"}, nil)
	m := notifytest.Sample(notify.KindNotify)
	m.Alerts[0].Labels = m.Alerts[0].Labels.Merge(alerts.Labels{"big": strings.Repeat("é<", 200<<10), "other": strings.Repeat("x", 300<<10)})
	ev := n.Build(m)[0]
	b, _ := json.Marshal(ev)
	if len(b) > MaxEventSize {
		t.Fatalf("event is %d bytes, PagerDuty refuses more than %d", len(b), MaxEventSize)
	}
	d := ev.Payload.CustomDetails
	str := func(k string) string { s, _ := d[k].(string); return s }
	if !strings.Contains(str(TruncatedKey), "bytes cut") || str("service") != "checkout" || !utf8.ValidString(str("big")) ||
		!strings.HasSuffix(str("other"), "…") {
		t.Fatalf("details %.200v", d)
	}
	if len(b) < MaxEventSize-(64<<10) {
		t.Fatalf("event cut to %d bytes, far below the limit", len(b))
	}
	// An event within the limit is left alone.
	if ev := n.Build(notifytest.Sample(notify.KindNotify))[0]; ev.Payload.CustomDetails[TruncatedKey] != nil {
		t.Fatal("small event marked truncated")
	}
}

func TestNegativeEventsPerMinuteIsRefused(t *testing.T) {
	_, err := New(Config{RoutingKey: "k", EventsPerMinute: -1}, nil)
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "events_per_minute") {
		t.Fatalf("err %v: want events_per_minute named", err)
	}
}

// A trigger shows the alert's annotations in custom_details, beside the
// labels, and its runbook_url as a link.
func TestTriggerCarriesAnnotationsAndRunbookLink(t *testing.T) {
	n, _ := New(Config{RoutingKey: "rk"}, nil)
	m := notifytest.Sample(notify.KindNotify)
	m.Alerts[0].Annotations = map[string]string{"summary": "Shed on checkout", "description": "checkout sheds 40% of requests",
		"runbook_url": "https://runbooks.example/shed"}
	b, _ := json.Marshal(n.Build(m)[0])
	var ev struct {
		Payload struct {
			CustomDetails map[string]any `json:"custom_details"`
		} `json:"payload"`
		Links []struct{ Href, Text string } `json:"links"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	d := ev.Payload.CustomDetails
	ann, _ := d["annotations"].(map[string]any)
	if d["service"] != "checkout" || ann["description"] != "checkout sheds 40% of requests" || ann["summary"] != "Shed on checkout" ||
		ann["runbook_url"] != "https://runbooks.example/shed" {
		t.Fatalf("custom_details %v", d)
	}
	if len(ev.Links) != 1 || ev.Links[0].Href != "https://runbooks.example/shed" || ev.Links[0].Text != "Runbook" {
		t.Fatalf("links %+v, want the runbook", ev.Links)
	}
}

// A huge description is cut to fit PagerDuty's 512 KB; the runbook link
// stays.
func TestHugeAnnotationIsCutAndRunbookLinkKept(t *testing.T) {
	n, _ := New(Config{RoutingKey: "rk"}, nil)
	m := notifytest.Sample(notify.KindNotify)
	m.Alerts[0].Annotations = map[string]string{"description": strings.Repeat("x", 600<<10), "runbook_url": "https://runbooks.example/shed"}
	e := n.Build(m)[0]
	b, _ := json.Marshal(e)
	if len(b) > MaxEventSize {
		t.Fatalf("event is %d bytes, PagerDuty refuses more than %d", len(b), MaxEventSize)
	}
	if !strings.Contains(string(b), `"href":"https://runbooks.example/shed"`) || !strings.Contains(string(b), TruncatedKey) {
		t.Fatalf("event %.300s: want the runbook link and the truncation note", b)
	}
}

// A retry after a failure of another alert does not send again an alert's
// resolve and trigger that PagerDuty accepted: resending them resolved the
// new incident and opened another one, a second page.
func TestRetryDoesNotReplayAnAlertsAcceptedResolveAndTrigger(t *testing.T) {
	var mu sync.Mutex
	var got []string
	failOther := true
	l := alerts.Labels{"alertname": "X", "service": "a", "severity": "P1"}
	other := alerts.Labels{"alertname": "X", "service": "b", "severity": "P1"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		_ = json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		defer mu.Unlock()
		if e.DedupKey == other.Fingerprint().String() && failOther {
			failOther = false
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		got = append(got, e.DedupKey[:4]+":"+e.EventAction)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n := fakeNotifier(t, clock.NewFake(time.Time{}), srv)
	fp := l.Fingerprint().String()
	t0 := notifytest.Sample(notify.KindNotify).CreatedAt
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, []notify.Alert{
		{Alert: alerts.Alert{Labels: l, StartsAt: t0, EndsAt: t0}, Status: notify.StatusResolved, Fingerprint: fp},
		{Alert: alerts.Alert{Labels: l, StartsAt: t0.Add(1)}, Status: notify.StatusFiring, Fingerprint: fp},
		{Alert: alerts.Alert{Labels: other}, Status: notify.StatusFiring, Fingerprint: other.Fingerprint().String()},
	}, t0)
	if retry, err := n.Notify(context.Background(), m); !retry || !errors.Is(err, notify.ErrPartial) {
		t.Fatalf("retry %v err %v: want a partial delivery", retry, err)
	}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	a, b := fp[:4], other.Fingerprint().String()[:4]
	if want := a + ":resolve," + a + ":trigger," + b + ":trigger"; strings.Join(got, ",") != want {
		t.Fatalf("PagerDuty got %v, want %s", got, want)
	}
}

// TestSendResolvedFalseSendsNoResolveEvents: with send_resolved false
// (applied by notify.FilterResolved, as the receivers are built)
// PagerDuty gets the triggers of a group and no resolve event, so the
// incident stays open until someone resolves it.
func TestSendResolvedFalseSendsNoResolveEvents(t *testing.T) {
	pd := &limitedPD{tokens: 100}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	off := false
	pn, err := New(Config{RoutingKey: "rk", URL: srv.URL, SendResolved: &off}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	n := notify.FilterResolved(pn, &off)
	defer n.(notify.Closer).Close()
	if retry, err := n.Notify(context.Background(), notifytest.SampleResolved(notify.KindNotify)); retry || err != nil {
		t.Fatalf("resolved-only message: retry %v, err %v", retry, err)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	got := pd.refill(0)
	if len(got) != 1 || got[0].EventAction != "trigger" {
		t.Fatalf("events %+v, want one trigger", got)
	}
}
