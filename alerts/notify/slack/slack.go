// Package slack posts to a Slack-style incoming webhook: a text line per
// group and one coloured attachment per alert (at most MaxAttachments).
package slack

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// Config of a Slack receiver.
type Config struct {
	URL     string `json:"url"`
	Channel string `json:"channel,omitempty"`
}

// Validate refuses a URL that is not http(s).
func (c Config) Validate() error { return notify.ValidateURL("slack: url", c.URL) }

// Message is the incoming-webhook body.
type Message struct {
	Channel     string       `json:"channel,omitempty"`
	Text        string       `json:"text"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// MaxAttachments is the most attachments a message carries: Slack refuses
// a message with more (too_many_attachments, 400), so a larger group shows
// its first alerts and a last attachment counting the others.
const MaxAttachments = 100

// Attachment is one alert.
type Attachment struct {
	Color string `json:"color"`
	Title string `json:"title"`
	Text  string `json:"text,omitempty"`
}

var _ notify.Notifier = (*Notifier)(nil)

// Notifier posts messages.
type Notifier struct {
	c      Config
	client *http.Client
}

// New validates c; client nil uses a default client.
func New(c Config, client *http.Client) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{c: c, client: client}, nil
}

// escaper turns Slack's control characters into the entities Slack
// displays as the characters themselves.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape returns s with &, < and > escaped as Slack requires of text that
// is not markup (https://api.slack.com/reference/surfaces/formatting#escaping).
func escape(s string) string { return escaper.Replace(s) }

// Build renders the body of a message: one attachment per alert, at most
// MaxAttachments. What comes from labels and annotations is escaped (&amp;,
// &lt;, &gt;), as Slack requires of text that is not markup: it shows as
// written, and a "<!channel>" in a summary notifies nobody. The markup the
// notifier writes itself is not escaped.
func Build(m *notify.Message, channel string) Message {
	verb := strings.ToUpper(m.Status)
	if m.Kind == notify.KindAcknowledge {
		verb = "ACKNOWLEDGED"
	}
	out := Message{Channel: channel, Text: fmt.Sprintf("[%s %s] %s (%d alerts)", m.Severity, verb, escape(m.GroupLabels.String()), len(m.Alerts))}
	for i, a := range m.Alerts {
		if i == MaxAttachments-1 && len(m.Alerts) > MaxAttachments {
			out.Attachments = append(out.Attachments, Attachment{Color: "#808080",
				Title: fmt.Sprintf("… and %d more alerts", len(m.Alerts)-i)})
			break
		}
		color := map[alerts.Severity]string{alerts.P0: "danger", alerts.P1: "warning", alerts.P2: "#439FE0"}[a.Severity()]
		if a.Status == notify.StatusResolved {
			color = "good"
		}
		title := a.Annotations["summary"]
		if title == "" {
			title = a.Labels["alertname"]
		}
		out.Attachments = append(out.Attachments, Attachment{Color: color, Title: "[" + a.Status + "] " + escape(title),
			Text: escape(a.Annotations["description"])})
	}
	return out
}

// Notify implements notify.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	return notify.PostJSON(ctx, n.client, n.c.URL, nil, Build(m, n.c.Channel))
}
