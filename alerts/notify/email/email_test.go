package email

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
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

// TestConfigValidate: each bad field is refused, named; a password without
// a username among them.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		c    Config
		want string
	}{
		{Config{Smarthost: "nohost", From: "a@b.c", To: []string{"d@e.f"}}, "smarthost"},
		{Config{Smarthost: "h:25", From: "nope", To: []string{"d@e.f"}}, "from"},
		{Config{Smarthost: "h:25", From: "a@b.c"}, "to"},
		{Config{Smarthost: "h:25", From: "a@b.c", To: []string{"bad"}}, "to[0]"},
		// Without a username the password would be ignored: no authentication.
		{Config{Smarthost: "h:25", From: "a@b.c", To: []string{"d@e.f"}, Password: "pw"}, "email: username: required with password"},
		{Config{Smarthost: "h:25", From: "a@b.c", To: []string{"d@e.f"}, Username: "u"}, "email: password: required with username"},
	}
	for _, tt := range tests {
		if err := tt.c.Validate(); !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%+v: %v, want %q", tt.c, err, tt.want)
		}
	}
	for _, c := range []Config{
		{Smarthost: "h:25", From: "a@b.c", To: []string{"d@e.f"}, Username: "u", Password: "pw"},
		{Smarthost: "h:25", From: "a@b.c", To: []string{"d@e.f"}},
	} {
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v refused: %v", c, err)
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

// Service names, summaries and display names with é, ü or 日本 arrive
// intact: the subject and display names are RFC 2047 encoded, the body is
// UTF-8 in quoted-printable, so every line is 7-bit and at most 998
// characters (a relay without 8BITMIME refuses 8-bit mail, and clients
// show raw UTF-8 headers as mojibake), however long an annotation.
func TestMailIsSevenBitWithEncodedNonASCIIText(t *testing.T) {
	s := newSMTPServer(t)
	n, err := New(Config{Smarthost: s.ln.Addr().String(), From: "Gouverneur Zürich <alerts@governor.test>",
		To: []string{"Équipe 日本 <oncall@governor.test>", "ops@governor.test"}})
	if err != nil {
		t.Fatal(err)
	}
	m := notifytest.Sample(notify.KindNotify)
	m.GroupLabels = alerts.Labels{"service": "café-日本", "alertname": "Überlast"}
	m.Alerts[0].Annotations = map[string]string{"summary": "Überlast on café", "description": strings.Repeat("lång ", 300)}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := <-s.mail
	_, data, _ := strings.Cut(got, "\n\n") // the test server turned CRLF into LF
	for i, line := range strings.Split(data, "\n") {
		if len(line) > 998 {
			t.Fatalf("line %d has %d characters, more than SMTP's 998", i, len(line))
		}
		for _, r := range line {
			if r > 127 {
				t.Fatalf("line %d is not 7-bit: %q", i, line)
			}
		}
	}
	msg, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	wantSubject, wantBody := Render(m)
	var dec mime.WordDecoder
	if subject, err := dec.DecodeHeader(msg.Header.Get("Subject")); err != nil || subject != wantSubject {
		t.Fatalf("subject %q (%v), want %q", subject, err, wantSubject)
	}
	if from, err := msg.Header.AddressList("From"); err != nil || len(from) != 1 || from[0].Name != "Gouverneur Zürich" {
		t.Fatalf("From %v (%v)", from, err)
	}
	to, err := msg.Header.AddressList("To")
	if err != nil || len(to) != 2 || to[0].Name != "Équipe 日本" || to[1].Address != "ops@governor.test" {
		t.Fatalf("To %v (%v)", to, err)
	}
	if ct := msg.Header.Get("Content-Type"); ct != "text/plain; charset=UTF-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cte := msg.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
		t.Fatalf("Content-Transfer-Encoding %q", cte)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil || strings.ReplaceAll(string(body), "\r\n", "\n") != wantBody {
		t.Fatalf("body %q (%v), want %q", body, err, wantBody)
	}
}

func TestHeaderFoldsLongLinesAtSpaces(t *testing.T) {
	long := strings.Repeat("word ", 40)
	tests := []struct {
		name, value string
	}{
		{"Subject", "short"},
		{"Subject", long},
		{"Subject", strings.Repeat("x", 120) + " tail"}, // no space within the width
		{"Message-ID", "<" + strings.Repeat("x", 120) + "@governor.test>"},
		{"Subject", mime.QEncoding.Encode("utf-8", strings.Repeat("日本 ", 30))},
		{"Subject", strings.Repeat("a  ", 30) + strings.Repeat(" ", 90)}, // runs of spaces, trailing ones
		{"Subject", strings.Repeat(" ", 90) + "word"},                    // leading ones
	}
	for _, tt := range tests {
		got := header(tt.name, tt.value)
		if !strings.HasSuffix(got, "\r\n") {
			t.Fatalf("%q: no CRLF at the end", got)
		}
		lines := strings.Split(strings.TrimSuffix(got, "\r\n"), "\r\n")
		if !strings.HasPrefix(lines[0], tt.name+": ") || strings.TrimSpace(strings.TrimPrefix(lines[0], tt.name+":")) == "" {
			t.Fatalf("%q: first line %q does not hold the name and a first word", got, lines[0])
		}
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, " ") || strings.TrimSpace(l) == "" {
				t.Fatalf("%q: continuation line %q", got, l)
			}
		}
		for i, l := range lines {
			rest := l
			if i == 0 {
				rest = strings.TrimPrefix(l, tt.name+":")
			}
			words := strings.TrimLeft(rest, " ")
			at := len(l) - len(words) // of the first word, which stays on its line
			words = strings.TrimRight(words, " ")
			// A space between two words within the width is a fold point.
			if at+len(words) > foldWidth && strings.Contains(words[:max(0, min(len(words), foldWidth-at))], " ") {
				t.Fatalf("%q: line %q is longer than %d with a space to fold at", got, l, foldWidth)
			}
		}
		if unfolded := strings.ReplaceAll(got, "\r\n ", " "); unfolded != tt.name+": "+tt.value+"\r\n" {
			t.Fatalf("unfolded %q, want the value %q", unfolded, tt.value)
		}
	}
}

func TestResolvedAlertMailSaysWhenItResolved(t *testing.T) {
	m := notifytest.Sample(notify.KindNotify)
	_, body := Render(m)
	if !strings.Contains(body, "[resolved] Load") || !strings.Contains(body, "resolved: 2026-03-02 10:01:00 UTC") {
		t.Fatalf("body lacks the end of the resolved alert:\n%s", body)
	}
	if strings.Count(body, "resolved: ") != 1 {
		t.Fatalf("a firing alert shows an end:\n%s", body)
	}
}

// Folding loses nothing and never leaves a line of white space only.
func FuzzHeaderFoldsLosslessly(f *testing.F) {
	f.Add("Subject", strings.Repeat("word ", 40))
	f.Add("Subject", " a  b \t c   ")
	f.Fuzz(func(t *testing.T, name, value string) {
		if strings.ContainsAny(name+value, "\r\n") {
			t.Skip() // header values are single lines (encoded words)
		}
		got := header(name, value)
		if unfolded := strings.ReplaceAll(got, "\r\n ", " "); unfolded != name+": "+value+"\r\n" {
			t.Fatalf("unfolded %q, want %q", unfolded, name+": "+value+"\r\n")
		}
		for _, l := range strings.Split(strings.TrimSuffix(got, "\r\n"), "\r\n")[1:] {
			if strings.Trim(l, " \t") == "" {
				t.Fatalf("%q: a continuation line is white space only", got)
			}
		}
	})
}
