// Package email sends notifications as plain-text mail through an SMTP
// relay with net/smtp.
package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
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
	// Username and Password enable PLAIN auth (the relay must offer TLS or
	// be on localhost, as net/smtp requires).
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
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
	return nil
}

var _ notify.Notifier = (*Notifier)(nil)

// Notifier sends mail.
type Notifier struct {
	c Config
}

// New validates c.
func New(c Config) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{c: c}, nil
}

// Render returns the subject and body of a message.
func Render(m *notify.Message) (subject, body string) {
	verb := strings.ToUpper(m.Status)
	if m.Kind == notify.KindAcknowledge {
		verb = "ACKNOWLEDGED"
	}
	subject = fmt.Sprintf("[%s %s] %s", m.Severity, verb, m.GroupLabels)
	var b strings.Builder
	for _, a := range m.Alerts {
		fmt.Fprintf(&b, "[%s] %s %s\n", a.Status, a.Labels["alertname"], a.Labels)
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if v := a.Annotations[k]; v != "" {
				fmt.Fprintf(&b, "  %s: %s\n", k, v)
			}
		}
		fmt.Fprintf(&b, "  since: %s\n", a.StartsAt.UTC().Format("2006-01-02 15:04:05 MST"))
	}
	return subject, b.String()
}

// Notify implements notify.Notifier. SMTP failures are retried. The
// attempt ends with ctx (the queue's timeout): a relay that accepts the
// connection and then stalls does not hold the receiver's queue.
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
	msg := "From: " + n.c.From + "\r\nTo: " + strings.Join(n.c.To, ", ") + "\r\nSubject: " + subject +
		"\r\nDate: " + date.Format(time.RFC1123Z)
	if m.ID != "" {
		_, domain, _ := strings.Cut(addr(n.c.From), "@")
		msg += "\r\nMessage-ID: <" + m.ID + "@" + domain + ">"
	}
	msg += "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.ReplaceAll(body, "\n", "\r\n")
	host, _, _ := net.SplitHostPort(n.c.Smarthost)
	var auth smtp.Auth
	if n.c.Username != "" {
		auth = smtp.PlainAuth("", n.c.Username, n.c.Password, host)
	}
	if err := send(ctx, n.c.Smarthost, host, auth, addr(n.c.From), addrs(n.c.To), []byte(msg)); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return true, fmt.Errorf("%w: email: %v", notify.ErrDelivery, err)
	}
	return false, nil
}

// send is smtp.SendMail on a connection that ctx closes: STARTTLS when the
// relay offers it, then authentication, envelope and data.
func send(ctx context.Context, smarthost, host string, auth smtp.Auth, from string, to []string, msg []byte) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", smarthost)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host}); err != nil {
			return err
		}
	}
	if auth != nil {
		if ok, _ := c.Extension("AUTH"); !ok {
			return errors.New("smtp: server doesn't support AUTH")
		}
		if err := c.Auth(auth); err != nil {
			return err
		}
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
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
