package email

import (
	"context"
	"errors"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"testing"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

// smtpServer is a minimal SMTP server accepting one message per session.
type smtpServer struct {
	ln   net.Listener
	mail chan string
}

func newSMTPServer(t *testing.T) *smtpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{ln: ln, mail: make(chan string, 4)}
	go s.serve()
	t.Cleanup(func() { _ = ln.Close() })
	return s
}

func (s *smtpServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.session(c)
	}
}

func (s *smtpServer) session(c net.Conn) {
	defer c.Close()
	tp := textproto.NewConn(c)
	_ = tp.PrintfLine("220 test ESMTP")
	var envelope []string
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb := strings.ToUpper(strings.Fields(line + " x")[0])
		switch verb {
		case "EHLO", "HELO":
			_ = tp.PrintfLine("250 test")
		case "MAIL", "RCPT":
			envelope = append(envelope, line)
			_ = tp.PrintfLine("250 ok")
		case "DATA":
			_ = tp.PrintfLine("354 go on")
			body, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			s.mail <- strings.Join(envelope, "\n") + "\n\n" + string(body)
			_ = tp.PrintfLine("250 queued")
		case "QUIT":
			_ = tp.PrintfLine("221 bye")
			return
		default:
			_ = tp.PrintfLine("250 ok")
		}
	}
}

func TestSendsMail(t *testing.T) {
	s := newSMTPServer(t)
	n, err := New(Config{Smarthost: s.ln.Addr().String(), From: "Governor <alerts@governor.test>", To: []string{"oncall@governor.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	got := <-s.mail
	for _, want := range []string{"MAIL FROM:<alerts@governor.test>", "RCPT TO:<oncall@governor.test>",
		"Subject: [P0 FIRING] {service=\"checkout\"}", "[firing] Shed", "summary: Shed on checkout", "[resolved] Load"} {
		if !strings.Contains(got, want) {
			t.Fatalf("mail lacks %q:\n%s", want, got)
		}
	}
}

func TestUnreachableRelayIsRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	n, _ := New(Config{Smarthost: addr, From: "a@b.test", To: []string{"c@d.test"}})
	if retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); !retry || !errors.Is(err, notify.ErrDelivery) {
		t.Fatalf("retry %v err %v", retry, err)
	}
}

// A relay that accepts the connection and then says nothing (a hung SMTP
// server) ends the attempt with its context, as an HTTP receiver does:
// smtp.SendMail has no deadline, and the worker of the receiver's queue
// would wait for good, with no retry, no give-up, and Close hanging.
func TestStalledRelayEndsWithTheAttempt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		accepted <- c
		if err == nil {
			cancel() // connected, no greeting: the attempt's context ends
		}
	}()
	n, _ := New(Config{Smarthost: ln.Addr().String(), From: "a@b.test", To: []string{"c@d.test"}})
	retry, err := n.Notify(ctx, notifytest.Sample(notify.KindNotify))
	if c := <-accepted; c != nil {
		_ = c.Close()
	}
	cancel()
	if !retry || !errors.Is(err, notify.ErrDelivery) || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("retry %v err %v, want a retryable delivery error naming the context", retry, err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		c    Config
		want string
	}{
		{Config{Smarthost: "nohost", From: "a@b.c", To: []string{"d@e.f"}}, "smarthost"},
		{Config{Smarthost: "h:25", From: "nope", To: []string{"d@e.f"}}, "from"},
		{Config{Smarthost: "h:25", From: "a@b.c"}, "to"},
		{Config{Smarthost: "h:25", From: "a@b.c", To: []string{"bad"}}, "to[0]"},
	}
	for _, tt := range tests {
		if err := tt.c.Validate(); !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%+v: %v, want %q", tt.c, err, tt.want)
		}
	}
}

func TestMailHasDateAndMessageID(t *testing.T) {
	s := newSMTPServer(t)
	n, _ := New(Config{Smarthost: s.ln.Addr().String(), From: "Governor <alerts@governor.test>", To: []string{"oncall@governor.test"}})
	m := notifytest.Sample(notify.KindNotify)
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := <-s.mail
	_, data, _ := strings.Cut(got, "\n\n")
	msg, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	d, err := msg.Header.Date()
	if err != nil || !d.Equal(m.CreatedAt) {
		t.Fatalf("Date header %v (%v), want %s: RFC 5322 requires it", d, err, m.CreatedAt)
	}
	if id := msg.Header.Get("Message-ID"); !strings.HasPrefix(id, "<") || !strings.Contains(id, m.ID) {
		t.Fatalf("Message-ID %q", id)
	}
}
