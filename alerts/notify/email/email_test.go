package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

// relay is a fake SMTP relay on a loopback port: it offers STARTTLS when
// it has a certificate, answers the commands by reply (keyed by verb, or
// by "RCPT <address>"), and records each session.
type relay struct {
	ln       net.Listener
	tls      *tls.Config
	reply    map[string]string
	hangQuit bool // closes the connection on QUIT without answering
	implicit bool // speaks TLS from the start, as on port 465
	mail     chan session
}

// session is what a client did on one connection.
type session struct {
	cmds []string
	tls  bool
	data string
}

// newRelay starts a relay, set up by opts; withTLS gives it a certificate
// for 127.0.0.1 and returns the pool that trusts it.
func newRelay(t *testing.T, withTLS bool, opts ...func(*relay)) (*relay, *x509.CertPool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, reply: map[string]string{}, mail: make(chan session, 4)}
	var pool *x509.CertPool
	if withTLS {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		r.tls = &tls.Config{Certificates: srv.TLS.Certificates}
		pool = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		srv.Close()
	}
	for _, o := range opts {
		o(r)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return r, pool
}

func (r *relay) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	s := &session{}
	if r.implicit {
		tc := tls.Server(c, r.tls)
		if err := tc.Handshake(); err != nil {
			return
		}
		c, s.tls = tc, true
	}
	tp := textproto.NewConn(c)
	_ = tp.PrintfLine("220 relay ESMTP")
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		s.cmds = append(s.cmds, line)
		verb := strings.ToUpper(strings.Fields(line + " x")[0])
		key := verb
		if verb == "RCPT" {
			key = "RCPT " + strings.Trim(strings.TrimPrefix(strings.ToUpper(line), "RCPT TO:"), "<>")
		}
		if rep, ok := r.reply[key]; ok && verb != "DATA" {
			_ = tp.PrintfLine("%s", rep)
			continue
		}
		switch verb {
		case "EHLO":
			ext := []string{"250-relay", "250-AUTH PLAIN"}
			if r.tls != nil && !s.tls {
				ext = append(ext, "250-STARTTLS")
			}
			ext = append(ext, "250 8BITMIME")
			for _, l := range ext {
				_ = tp.PrintfLine("%s", l)
			}
		case "STARTTLS":
			_ = tp.PrintfLine("220 go ahead")
			tc := tls.Server(c, r.tls)
			if err := tc.Handshake(); err != nil {
				return
			}
			c, s.tls = tc, true
			tp = textproto.NewConn(tc)
		case "AUTH":
			_ = tp.PrintfLine("235 ok")
		case "DATA":
			_ = tp.PrintfLine("354 go on")
			body, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			s.data = string(body)
			if rep, ok := r.reply["DATA"]; ok {
				_ = tp.PrintfLine("%s", rep)
				continue
			}
			r.mail <- *s
			_ = tp.PrintfLine("250 queued")
		case "QUIT":
			if r.hangQuit {
				return
			}
			_ = tp.PrintfLine("221 bye")
			return
		default:
			_ = tp.PrintfLine("250 ok")
		}
	}
}

func newNotifier(t *testing.T, c Config, pool *x509.CertPool) *Notifier {
	t.Helper()
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if pool != nil {
		n.tls = &tls.Config{RootCAs: pool}
	}
	return n
}

// text is the session as the relay saw it: the commands, a blank line,
// then the mail (with LF line ends).
func (s session) text() string { return strings.Join(s.cmds, "\n") + "\n\n" + s.data }

func TestSendsMail(t *testing.T) {
	r, pool := newRelay(t, true)
	n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "Governor <alerts@governor.test>", To: []string{"oncall@governor.test"}}, pool)
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	got := (<-r.mail).text()
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
	r, pool := newRelay(t, true)
	n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "Governor <alerts@governor.test>", To: []string{"oncall@governor.test"}}, pool)
	m := notifytest.Sample(notify.KindNotify)
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := (<-r.mail).text()
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
	r, pool := newRelay(t, true)
	n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "Gouverneur Zürich <alerts@governor.test>",
		To: []string{"Équipe 日本 <oncall@governor.test>", "ops@governor.test"}}, pool)
	m := notifytest.Sample(notify.KindNotify)
	m.GroupLabels = alerts.Labels{"service": "café-日本", "alertname": "Überlast"}
	m.Alerts[0].Annotations = map[string]string{"summary": "Überlast on café", "description": strings.Repeat("lång ", 300)}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	data := (<-r.mail).data // the test relay turned CRLF into LF
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
		// Header values are single lines (encoded words).
		oneLine := strings.NewReplacer("\r", "", "\n", "")
		name, value = oneLine.Replace(name), oneLine.Replace(value)
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

// A group label of thousands of characters without a space (a URL) does
// not make a subject line longer than SMTP's 998.
func TestLongSubjectWithoutSpacesStaysWithinLineLimit(t *testing.T) {
	r, pool := newRelay(t, true)
	n := newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "a@governor.test", To: []string{"o@governor.test"}}, pool)
	m := notifytest.Sample(notify.KindNotify)
	m.GroupLabels = alerts.Labels{"url": "https://x.test/" + strings.Repeat("a", 3000)}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	s := <-r.mail
	for _, l := range strings.Split(s.data, "\n") {
		if len(l) > 998 {
			t.Fatalf("line of %d characters: %.80q", len(l), l)
		}
	}
	msg, err := mail.ReadMessage(strings.NewReader(s.data))
	if err != nil || msg.Header.Get("Subject") == "" {
		t.Fatalf("%v", err)
	}
}

// Labels and annotations cannot add headers or break the mail: whatever
// they hold (CR, LF, "Bcc:", non-ASCII, thousands of characters), the mail
// has exactly its own headers, every line is 7-bit and at most 998
// characters, and the subject and body read back as rendered.
func FuzzMailHoldsNoInjectedHeaders(f *testing.F) {
	f.Add("checkout", "Shed on checkout", "p99 > 2s")
	f.Add("x\r\nBcc: evil@example.test", "s\r\nBcc: evil@example.test\r\n", "\r\n.\r\nMAIL FROM:<x@y>")
	f.Add(strings.Repeat("a", 3000), strings.Repeat("日本", 900), strings.Repeat("z", 2000))
	n, err := New(Config{Smarthost: "relay.test:25", From: "Governor <alerts@governor.test>", To: []string{"oncall@governor.test", "Ops <ops@governor.test>"}})
	if err != nil {
		f.Fatal(err)
	}
	want := []string{"Content-Transfer-Encoding", "Content-Type", "Date", "From", "Message-Id", "Mime-Version", "Subject", "To"}
	f.Fuzz(func(t *testing.T, group, summary, description string) {
		m := notifytest.Sample(notify.KindNotify)
		m.GroupLabels = alerts.Labels{"service": group}
		m.Alerts[0].Annotations = map[string]string{"summary": summary, "description": description}
		subject, body := Render(m)
		raw, err := n.compose(m.ID, subject, body, m.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\r\n") {
			if len(line) > 998 || strings.ContainsAny(line, "\r\n") {
				t.Fatalf("line %d of %d characters: %.80q", i, len(line), line)
			}
			for _, r := range line {
				if r > 127 {
					t.Fatalf("line %d is not 7-bit: %.80q", i, line)
				}
			}
		}
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(msg.Header)); !slices.Equal(got, want) {
			t.Fatalf("headers %v, want %v", got, want)
		}
		var dec mime.WordDecoder
		if got, err := dec.DecodeHeader(msg.Header.Get("Subject")); !strings.Contains(subject, "=?") && (err != nil || got != subject) {
			t.Fatalf("subject %q (%v), want %q", got, err, subject)
		}
		if _, err := io.ReadAll(quotedprintable.NewReader(msg.Body)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSendResolvedFalseMailsFiringAlertsOnly: with send_resolved false
// (applied by notify.FilterResolved, as the receivers are built) a group
// whose alerts all resolved is not mailed, and a mail of a group
// with both lists the firing alerts only.
func TestSendResolvedFalseMailsFiringAlertsOnly(t *testing.T) {
	r, pool := newRelay(t, true)
	off := false
	n := notify.FilterResolved(newNotifier(t, Config{Smarthost: r.ln.Addr().String(), From: "alerts@governor.test",
		To: []string{"oncall@governor.test"}, SendResolved: &off}, pool), &off)
	if retry, err := n.Notify(context.Background(), notifytest.SampleResolved(notify.KindNotify)); retry || err != nil {
		t.Fatalf("resolved-only message: retry %v, err %v", retry, err)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	got := (<-r.mail).text()
	if !strings.Contains(got, "[firing] Shed") || strings.Contains(got, "[resolved]") || strings.Contains(got, "Load") {
		t.Fatalf("mail:\n%s", got)
	}
}
