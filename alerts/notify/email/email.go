// Package email sends notifications as plain-text mail through an SMTP
// relay with net/smtp, over TLS from the start on port 465 (SMTPS) and
// over STARTTLS on other ports unless Config.AllowPlaintext allows a relay
// without it. The mail is 7-bit: headers with non-ASCII text are
// RFC 2047 encoded and the UTF-8 body is quoted-printable. A 4xx reply of
// the relay is retried, a 5xx reply is final, and a recipient refused for
// good does not keep the mail from the others.
package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// Config of an e-mail receiver.
type Config struct {
	// Smarthost is host:port of the SMTP relay.
	Smarthost string   `json:"smarthost"`
	From      string   `json:"from"`
	To        []string `json:"to"`
	// Username and Password enable PLAIN auth, sent only over TLS or to a
	// relay on localhost (as net/smtp requires). One without the other is
	// refused.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// AllowPlaintext sends the mail unencrypted to a relay that offers no
	// STARTTLS. Without it, such a relay (or a connection on which
	// STARTTLS was stripped) gets nothing, and the delivery fails for good
	// with an error naming this setting.
	AllowPlaintext bool `json:"allow_plaintext,omitempty"`
	// SendResolved false sends no resolved alerts, as Alertmanager's
	// send_resolved: a message of resolved alerts only is not sent, and one
	// with firing alerts too carries the firing ones. It is applied where
	// the receivers are built (notify.FilterResolved, as alerts/config
	// does); New leaves it to that. Omitted: true.
	SendResolved *bool `json:"send_resolved,omitempty"`
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Smarthost); err != nil {
		return fmt.Errorf("%w: email: smarthost %q: want host:port", alerts.ErrInvalid, c.Smarthost)
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		return fmt.Errorf("%w: email: from %q: %v", alerts.ErrInvalid, c.From, err)
	}
	if len(c.To) == 0 {
		return fmt.Errorf("%w: email: to: at least one address is required", alerts.ErrInvalid)
	}
	for i, to := range c.To {
		if _, err := mail.ParseAddress(to); err != nil {
			return fmt.Errorf("%w: email: to[%d] %q: %v", alerts.ErrInvalid, i, to, err)
		}
	}
	if c.Password != "" && c.Username == "" {
		// Without a username no authentication is made: the password
		// would be ignored and the mail sent unauthenticated.
		return fmt.Errorf("%w: email: username: required with password (SMTP PLAIN authentication needs both)", alerts.ErrInvalid)
	}
	if c.Username != "" && c.Password == "" {
		// An empty password (a secret that did not reach the config) fails
		// only when the first page is sent.
		return fmt.Errorf("%w: email: password: required with username (SMTP PLAIN authentication needs both)", alerts.ErrInvalid)
	}
	return nil
}

var _ notify.Notifier = (*Notifier)(nil)

// Notifier sends mail.
type Notifier struct {
	c Config
	// tls is the base of the STARTTLS configuration (nil: the system's
	// roots); tests trust their relay's certificate with it.
	tls *tls.Config
	// implicitTLS speaks TLS from the connection's start (SMTPS, port 465).
	implicitTLS bool
}

// New validates c.
func New(c Config) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(c.Smarthost)
	return &Notifier{c: c, implicitTLS: port == "465"}, nil
}

// timeLayout formats the times of the body.
const timeLayout = "2006-01-02 15:04:05 MST"

// MaxSubjectLen is the most characters of a subject: longer group labels
// end in an ellipsis, so that no header line of the mail passes SMTP's
// 998 characters (an ASCII subject without spaces cannot be folded).
const MaxSubjectLen = 250

// Render returns the subject (at most MaxSubjectLen characters) and body
// of a message, as text: Notify encodes them for the mail.
func Render(m *notify.Message) (subject, body string) {
	verb := strings.ToUpper(m.Status)
	if m.Kind == notify.KindAcknowledge {
		verb = "ACKNOWLEDGED"
	}
	subject = fmt.Sprintf("[%s %s] %s", m.Severity, verb, m.GroupLabels)
	if r := []rune(subject); len(r) > MaxSubjectLen {
		subject = string(r[:MaxSubjectLen-1]) + "…"
	}
	var b strings.Builder
	for _, a := range m.Alerts {
		fmt.Fprintf(&b, "[%s] %s %s\n", a.Status, a.Labels["alertname"], a.Labels)
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if v := a.Annotations[k]; v != "" {
				fmt.Fprintf(&b, "  %s: %s\n", k, v)
			}
		}
		fmt.Fprintf(&b, "  since: %s\n", a.StartsAt.UTC().Format(timeLayout))
		if a.Status == notify.StatusResolved && !a.EndsAt.IsZero() {
			fmt.Fprintf(&b, "  resolved: %s\n", a.EndsAt.UTC().Format(timeLayout))
		}
	}
	return subject, b.String()
}

// Notify implements notify.Notifier. The mail goes over STARTTLS unless
// the configuration allows plaintext. A reply of the relay in the 4xx
// class, and a connection that fails, are retried; a 5xx reply is final.
// A recipient the relay refuses for good does not keep the mail from the
// others: it goes to those accepted, and the final error names the
// refused ones and wraps notify.ErrDeliveredIncomplete, so that those
// accepted are not mailed it again. A temporary refusal of any recipient
// sends nothing, so that the retry mails nobody twice. Errors name the
// relay, never the password. The attempt ends with ctx (the queue's timeout): a relay that
// accepts the connection and then stalls does not hold the receiver's
// queue.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	subject, body := Render(m)
	// Date is required by RFC 5322 and Message-ID expected: relays do not
	// add them for a remote client, and large mailbox providers refuse or
	// spam-file mail without them. A retried message keeps its Message-ID.
	date := m.CreatedAt
	if date.IsZero() {
		date = time.Now()
	}
	msg, err := n.compose(m.ID, subject, body, date)
	if err != nil {
		return false, fmt.Errorf("%w: email: %v", notify.ErrDelivery, err)
	}
	host, _, _ := net.SplitHostPort(n.c.Smarthost)
	var auth smtp.Auth
	if n.c.Username != "" {
		auth = smtp.PlainAuth("", n.c.Username, n.c.Password, host)
	}
	retry, err := n.send(ctx, host, auth, addr(n.c.From), addrs(n.c.To), msg)
	if err != nil {
		if errors.Is(err, notify.ErrDeliveredIncomplete) {
			// Sent to some, even if the deadline passed after: the
			// manager keeps it from mailing them again.
			return false, fmt.Errorf("%w: email: relay %s: %w", notify.ErrDelivery, n.c.Smarthost, err)
		}
		if ctx.Err() != nil {
			retry, err = true, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return retry, fmt.Errorf("%w: email: relay %s: %v", notify.ErrDelivery, n.c.Smarthost, err)
	}
	return false, nil
}

// compose renders the mail. It is 7-bit, as SMTP without extensions
// requires: non-ASCII in the subject and in display names is RFC 2047
// encoded, the UTF-8 body is quoted-printable (which also keeps its lines
// short, however long an annotation), and long header lines are folded.
func (n *Notifier) compose(id, subject, body string, date time.Time) ([]byte, error) {
	from, err := mail.ParseAddress(n.c.From)
	if err != nil {
		return nil, fmt.Errorf("from %q: %v", n.c.From, err)
	}
	to := make([]string, len(n.c.To))
	for i, s := range n.c.To {
		a, err := mail.ParseAddress(s)
		if err != nil {
			return nil, fmt.Errorf("to[%d] %q: %v", i, s, err)
		}
		to[i] = a.String()
	}
	var b bytes.Buffer
	b.WriteString(header("From", from.String()))
	b.WriteString(header("To", strings.Join(to, ", ")))
	b.WriteString(header("Subject", mime.QEncoding.Encode("utf-8", subject)))
	b.WriteString(header("Date", date.Format(time.RFC1123Z)))
	if id != "" {
		_, domain, _ := strings.Cut(from.Address, "@")
		b.WriteString(header("Message-ID", "<"+id+"@"+domain+">"))
	}
	b.WriteString(header("MIME-Version", "1.0"))
	b.WriteString(header("Content-Type", "text/plain; charset=UTF-8"))
	b.WriteString(header("Content-Transfer-Encoding", "quoted-printable"))
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(strings.ReplaceAll(body, "\n", "\r\n"))); err != nil {
		return nil, err
	}
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// foldWidth is the length past which a header line is folded, RFC 5322's
// recommended 78 characters.
const foldWidth = 78

// header returns the header field name: value ending in CRLF, folded
// before spaces of the value into lines of at most foldWidth characters
// where it has spaces to break at (encoded words are separated by spaces).
func header(name, value string) string {
	var b strings.Builder
	line := name + ": " + value
	from := len(name) + 2 // the value's first word stays on the name's line
	for len(line) > foldWidth {
		i := foldAt(line, from)
		if i < 0 {
			break
		}
		b.WriteString(line[:i])
		b.WriteString("\r\n")
		line = line[i:] // the space starts the continuation line
		from = 1
	}
	b.WriteString(line)
	b.WriteString("\r\n")
	return b.String()
}

// foldAt returns where to fold a header line: the last space within
// foldWidth, else the first one, that has a word before it (at or after
// from) and a word after it, so that no line is white space only; -1 for
// none.
func foldAt(line string, from int) int {
	last := strings.LastIndexFunc(line, func(r rune) bool { return r != ' ' && r != '\t' })
	at, word := -1, false
	for i := from; i < last; i++ {
		switch {
		case line[i] != ' ' && line[i] != '\t':
			word = true
		case line[i] == ' ' && word:
			if i > foldWidth {
				if at < 0 {
					at = i
				}
				return at
			}
			at = i
		}
	}
	return at
}

// errNoSTARTTLS refuses to send in clear to a relay without STARTTLS.
var errNoSTARTTLS = errors.New("the relay offers no STARTTLS; set allow_plaintext to send unencrypted")

// send is smtp.SendMail on a connection that ctx closes: TLS from the
// start on port 465, else STARTTLS (unless plaintext is allowed and the
// relay has none), then authentication, envelope and data. It reports
// whether a failure is worth a retry (see Notify).
func (n *Notifier) send(ctx context.Context, host string, auth smtp.Auth, from string, to []string, msg []byte) (retry bool, err error) {
	cfg := &tls.Config{}
	if n.tls != nil {
		cfg = n.tls.Clone()
	}
	cfg.ServerName = host
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", n.c.Smarthost)
	if err != nil {
		return true, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if n.implicitTLS {
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return true, err
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close()
		return temporary(err), err
	}
	defer c.Close()
	if _, isTLS := conn.(*tls.Conn); !isTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(cfg); err != nil {
				return temporary(err), err
			}
		} else if !n.c.AllowPlaintext {
			return false, errNoSTARTTLS
		}
	}
	if auth != nil {
		if ok, _ := c.Extension("AUTH"); !ok {
			return false, errors.New("the relay offers no AUTH, and username and password are set")
		}
		if err := c.Auth(auth); err != nil {
			return temporary(err), fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(from); err != nil {
		return temporary(err), fmt.Errorf("MAIL FROM:<%s>: %w", from, err)
	}
	var refused []string
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			if temporary(err) {
				return true, fmt.Errorf("RCPT TO:<%s>: %w", rcpt, err)
			}
			refused = append(refused, fmt.Sprintf("RCPT TO:<%s>: %v", rcpt, err))
		}
	}
	if len(refused) == len(to) {
		return false, errors.New(strings.Join(refused, "; "))
	}
	w, err := c.Data()
	if err != nil {
		return temporary(err), fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return true, fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return temporary(err), fmt.Errorf("DATA: %w", err)
	}
	// The relay has the mail: a failed QUIT changes nothing, and a retry
	// would page twice.
	_ = c.Quit()
	if len(refused) > 0 {
		return false, fmt.Errorf("%w: sent to %d of %d recipients; refused: %s", notify.ErrDeliveredIncomplete,
			len(to)-len(refused), len(to), strings.Join(refused, "; "))
	}
	return false, nil
}

// temporary reports whether a failure is worth a retry: any but a reply of
// the relay in the 5xx class (RFC 5321 4.2.1: permanent negative
// completion).
func temporary(err error) bool {
	var te *textproto.Error
	return !errors.As(err, &te) || te.Code/100 != 5
}

func addr(s string) string {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return s
	}
	return a.Address
}

func addrs(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = addr(s)
	}
	return out
}
