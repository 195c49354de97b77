package email

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

// Mail goes over TLS: STARTTLS before the password and the alerts.
func TestMailGoesOverSTARTTLS(t *testing.T) {
	r, pool := newRelay(t, true)
	n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "a@governor.test", To: []string{"o@governor.test"},
		Username: "u", Password: "hunter2"}, pool)
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	s := <-r.mail
	cmds := strings.Join(s.cmds, "\n")
	if !s.tls || !strings.Contains(s.data, "Shed") || strings.Index(cmds, "STARTTLS") > strings.Index(cmds, "AUTH") {
		t.Fatalf("session %+v", s)
	}
}

// A relay that offers no STARTTLS (or a connection where it was stripped)
// gets nothing unless allow_plaintext says so: the error names the relay
// and the setting, and is final.
func TestRelayWithoutSTARTTLSIsRefusedUnlessPlaintextAllowed(t *testing.T) {
	r, _ := newRelay(t, false)
	c := Config{Smarthost: r.ln.Addr().String(), From: "a@governor.test", To: []string{"o@governor.test"}}
	retry, err := newNotifier(t, c, nil).Notify(context.Background(), notifytest.Sample(notify.KindNotify))
	if retry || !errors.Is(err, notify.ErrDelivery) || !strings.Contains(err.Error(), "STARTTLS") ||
		!strings.Contains(err.Error(), "allow_plaintext") || !strings.Contains(err.Error(), c.Smarthost) || len(r.mail) != 0 {
		t.Fatalf("retry %v err %v, %d mails", retry, err, len(r.mail))
	}
	c.AllowPlaintext = true
	if _, err := newNotifier(t, c, nil).Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	if s := <-r.mail; s.tls {
		t.Fatal("tls")
	}
}

// SMTP replies 4xx are temporary (retried), 5xx final; errors name the
// relay and never hold the password.
func TestSMTPReplyClassesDecideRetry(t *testing.T) {
	tests := []struct {
		cmd, reply string
		retry      bool
	}{
		{"MAIL", "451 4.3.0 try later", true},
		{"MAIL", "550 5.7.1 sender rejected", false},
		{"AUTH", "535 5.7.8 bad credentials", false},
		{"AUTH", "454 4.7.0 temporary auth failure", true},
		{"DATA", "554 5.7.1 spam", false},
		{"DATA", "452 4.3.1 insufficient storage", true},
		{"RCPT O@GOVERNOR.TEST", "450 4.2.0 greylisted", true},
		{"RCPT O@GOVERNOR.TEST", "550 5.1.1 no such user", false},
	}
	for _, tt := range tests {
		r, pool := newRelay(t, true, func(r *relay) { r.reply[tt.cmd] = tt.reply })
		n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "a@governor.test", To: []string{"o@governor.test"},
			Username: "u", Password: "hunter2"}, pool)
		retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify))
		if retry != tt.retry || !errors.Is(err, notify.ErrDelivery) || !strings.Contains(err.Error(), tt.reply[4:]) ||
			strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), r.ln.Addr().String()) {
			t.Errorf("%s %q: retry %v err %v, want retry %v", tt.cmd, tt.reply, retry, err, tt.retry)
		}
	}
}

// One refused address (a person who left) does not keep the page from the
// others: the mail goes to the accepted ones and the error, final, names
// the refused one and says the mail was delivered in part
// (notify.ErrDeliveredIncomplete), so that it is not sent again. A temporary refusal sends nothing, so that the retry
// does not mail the others twice.
func TestRefusedRecipientDoesNotBlockTheOthers(t *testing.T) {
	r, pool := newRelay(t, true, func(r *relay) { r.reply["RCPT GONE@GOVERNOR.TEST"] = "550 5.1.1 no such user" })
	c := Config{Smarthost: r.ln.Addr().String(), From: "a@governor.test", To: []string{"gone@governor.test", "oncall@governor.test"}}
	n := newNotifier(t, c, pool)
	retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify))
	if retry || !errors.Is(err, notify.ErrDelivery) || !errors.Is(err, notify.ErrDeliveredIncomplete) ||
		!strings.Contains(err.Error(), "gone@governor.test") || !strings.Contains(err.Error(), "sent to 1 of 2") {
		t.Fatalf("retry %v err %v", retry, err)
	}
	if s := <-r.mail; !strings.Contains(strings.Join(s.cmds, "\n"), "RCPT TO:<oncall@governor.test>") {
		t.Fatalf("session %+v", s)
	}
	r, pool = newRelay(t, true, func(r *relay) { r.reply["RCPT GONE@GOVERNOR.TEST"] = "450 4.2.0 greylisted" })
	c.Smarthost = r.ln.Addr().String()
	retry, err = newNotifier(t, c, pool).Notify(context.Background(), notifytest.Sample(notify.KindNotify))
	if !retry || err == nil || errors.Is(err, notify.ErrDeliveredIncomplete) || len(r.mail) != 0 {
		t.Fatalf("retry %v err %v, %d mails", retry, err, len(r.mail))
	}
}

// A relay that accepted the mail and then drops the connection at QUIT
// has the mail: the attempt succeeded, and a retry would page twice.
func TestMailAcceptedBeforeQuitFailsIsDelivered(t *testing.T) {
	r, pool := newRelay(t, true, func(r *relay) { r.hangQuit = true })
	n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "a@governor.test", To: []string{"o@governor.test"}}, pool)
	if retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatalf("retry %v err %v", retry, err)
	}
}

// A relay on port 465 (SMTPS) speaks TLS from the start: the client does
// not wait for a greeting in clear, which such a relay never sends.
func TestRelayOnPort465SpeaksTLSFromTheStart(t *testing.T) {
	r, pool := newRelay(t, true, func(r *relay) { r.implicit = true })
	n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "a@governor.test", To: []string{"o@governor.test"}}, pool)
	n.implicitTLS = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard: a client waiting for a greeting in clear waits for good
	defer cancel()
	if _, err := n.Notify(ctx, notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	if s := <-r.mail; !s.tls {
		t.Fatal("not over TLS")
	}
	for _, tt := range []struct {
		smarthost string
		implicit  bool
	}{{"smtp.example.test:465", true}, {"smtp.example.test:587", false}, {"smtp.example.test:25", false}} {
		n, _ := New(Config{Smarthost: tt.smarthost, From: "a@governor.test", To: []string{"o@governor.test"}})
		if n.implicitTLS != tt.implicit {
			t.Errorf("%s: implicit TLS %v", tt.smarthost, n.implicitTLS)
		}
	}
}
