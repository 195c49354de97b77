package manager

import (
	"context"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/email"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
)

// mailRelay is a plaintext SMTP relay that refuses one address for good
// (550) and counts the mails each accepted address got.
type mailRelay struct {
	ln     net.Listener
	refuse string
	mu     sync.Mutex
	mails  map[string][]string // the mails (headers and body) each address got
}

func newMailRelay(t *testing.T, refuse string) *mailRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &mailRelay{ln: ln, refuse: refuse, mails: map[string][]string{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { r.serve(c) })
		}
	})
	return r
}

func (r *mailRelay) serve(c net.Conn) {
	defer c.Close()
	tp := textproto.NewConn(c)
	_ = tp.PrintfLine("220 relay.test ESMTP")
	var rcpts []string
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		cmd := strings.ToUpper(line)
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			_ = tp.PrintfLine("250-relay.test")
			_ = tp.PrintfLine("250 8BITMIME")
		case strings.HasPrefix(cmd, "MAIL"):
			rcpts = nil
			_ = tp.PrintfLine("250 2.1.0 ok")
		case strings.HasPrefix(cmd, "RCPT TO:"):
			a := strings.Trim(line[len("RCPT TO:"):], "<> ")
			if strings.EqualFold(a, r.refuse) {
				_ = tp.PrintfLine("550 5.1.1 no such user")
				continue
			}
			rcpts = append(rcpts, a)
			_ = tp.PrintfLine("250 2.1.5 ok")
		case cmd == "DATA":
			_ = tp.PrintfLine("354 go ahead")
			data, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			r.mu.Lock()
			for _, a := range rcpts {
				r.mails[a] = append(r.mails[a], string(data))
			}
			r.mu.Unlock()
			_ = tp.PrintfLine("250 2.0.0 queued")
		case cmd == "QUIT":
			_ = tp.PrintfLine("221 bye")
			return
		default:
			_ = tp.PrintfLine("250 ok")
		}
	}
}

// count returns how many mails to a mention s.
func (r *mailRelay) count(a, s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.mails[a] {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// A mail that reached some of its recipients and was refused for good by
// the others is delivered: the group does not notify again at the next
// group interval (the accepted ones would get it every interval), and the
// refusal shows in the log, the failed counter and the receiver's health.
func TestMailRefusedForOneRecipientIsNotSentAgainToTheOthers(t *testing.T) {
	h := newHarness(t)
	relay := newMailRelay(t, "gone@governor.test")
	mail, err := email.New(email.Config{Smarthost: relay.ln.Addr().String(), From: "governor@governor.test",
		To: []string{"oncall@governor.test", "gone@governor.test"}, AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	h.close()
	if h.st, err = store.OpenSQLite(context.Background(), h.path, store.Options{}); err != nil {
		t.Fatal(err)
	}
	h.reg = prometheus.NewRegistry()
	h.m, err = New(context.Background(), Options{
		Rules: testRules, Query: h.db.query, Store: h.st, Clock: h.clk, Registerer: h.reg,
		Receivers: map[string]notify.Notifier{"mail": mail},
		Routes:    []dispatch.Route{{Receiver: "mail"}},
		Timing:    dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute},
		Queue:     notify.QueueOptions{InitialBackoff: time.Second, MaxAttempts: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.db.set("load", "search")
	for d := time.Duration(0); d <= 4*time.Minute; d += 30 * time.Second {
		h.at(d)
	}
	if n := relay.count("oncall@governor.test", "Load"); n != 1 {
		t.Fatalf("oncall@ got %d mails of the alert across three group intervals, want 1", n)
	}
	// The refusal is seen: the receiver's failing alert (mailed to those
	// the relay takes, once too) and the failed counter; the log entries
	// are closed.
	if n := relay.count("oncall@governor.test", rule.ReceiverFailingRule); n != 1 {
		t.Fatalf("oncall@ got %d mails of the receiver failing, want 1", n)
	}
	if n := testutil.ToFloat64(h.m.m.delivery.Failed("mail")); n != 2 {
		t.Fatalf("failed counter %v, want 2 (both mails)", n)
	}
	if p, err := h.st.Undelivered(context.Background()); err != nil || len(p) != 0 {
		t.Fatalf("log entries left open %+v, %v", p, err)
	}
	// So is an acknowledgement: mailed once, not owed again.
	fp := alerts.Labels{"alertname": "Load", "service": "search", "severity": "P1"}.Fingerprint()
	if _, err := h.m.Acknowledge(context.Background(), fp, "ops", "on it", h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	for d := 4*time.Minute + 30*time.Second; d <= 8*time.Minute; d += 30 * time.Second {
		h.at(d)
	}
	if n := relay.count("oncall@governor.test", "ACKNOWLEDGED"); n != 1 {
		t.Fatalf("oncall@ got %d mails of the acknowledgement across three group intervals, want 1", n)
	}
	if p, err := h.st.Undelivered(context.Background()); err != nil || len(p) != 0 {
		t.Fatalf("log entries left open after the acknowledgement %+v, %v", p, err)
	}
}
