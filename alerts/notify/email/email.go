// Package email sends notifications as plain-text mail through an SMTP
// relay with net/smtp.
package email

import (
	"context"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"strings"

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

// Notify implements notify.Notifier. SMTP failures are retried.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	subject, body := Render(m)
	msg := "From: " + n.c.From + "\r\nTo: " + strings.Join(n.c.To, ", ") + "\r\nSubject: " + subject +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.ReplaceAll(body, "\n", "\r\n")
	var auth smtp.Auth
	if n.c.Username != "" {
		host, _, _ := net.SplitHostPort(n.c.Smarthost)
		auth = smtp.PlainAuth("", n.c.Username, n.c.Password, host)
	}
	if err := smtp.SendMail(n.c.Smarthost, auth, addr(n.c.From), addrs(n.c.To), []byte(msg)); err != nil {
		return true, fmt.Errorf("%w: email: %v", notify.ErrDelivery, err)
	}
	return false, nil
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
