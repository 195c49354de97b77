// Package slack posts to a Slack-style incoming webhook: a text line per
// group and one coloured attachment per alert. A message always stays
// within Slack's limits, so that a large group is neither refused nor cut
// by Slack mid-way: at most MaxAttachments attachments, the text line and
// each attachment's title and text at most MaxFieldLen characters, and all
// of them together at most MaxMessageLen. What does not fit ends in an
// ellipsis, and the alerts left out are counted in a last attachment,
// "… and N more alerts".
package slack

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// Config of a Slack receiver.
type Config struct {
	URL     string `json:"url"`
	Channel string `json:"channel,omitempty"`
	// SendResolved false sends no resolved alerts, as Alertmanager's
	// send_resolved: a message of resolved alerts only is not sent, and one
	// with firing alerts too carries the firing ones. It is applied where
	// the receivers are built (notify.FilterResolved, as alerts/config
	// does); New leaves it to that. Omitted: true.
	SendResolved *bool `json:"send_resolved,omitempty"`
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

// MaxMessageLen is the most characters a message carries in its text and
// its attachments' titles and texts together: Slack cuts a message's text
// after 40,000 characters.
const MaxMessageLen = 40000

// MaxFieldLen is the most characters of the text line and of each
// attachment's title and text: the limit Slack sets on a section block's
// text, which keeps one long annotation from taking a message's room.
const MaxFieldLen = 3000

// moreLen is the room kept for the attachment counting the alerts left out.
const moreLen = 64

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

// New validates c; client nil uses a default client. Redirects are not
// followed (see notify.NoRedirects).
func New(c Config, client *http.Client) (*Notifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{c: c, client: notify.NoRedirects(client)}, nil
}

// escaper turns Slack's control characters into the entities Slack
// displays as the characters themselves.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape returns s with &, < and > escaped as Slack requires of text that
// is not markup (https://api.slack.com/reference/surfaces/formatting#escaping).
func escape(s string) string { return escaper.Replace(s) }

// escapeCut escapes s as escape does and cuts the result to at most
// limit characters, the last one an ellipsis, without splitting an entity.
func escapeCut(s string, limit int) string {
	e := escape(s)
	if utf8.RuneCountInString(e) <= limit {
		return e
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		piece := escape(string(r))
		if n+utf8.RuneCountInString(piece) > limit-1 {
			break
		}
		b.WriteString(piece)
		n += utf8.RuneCountInString(piece)
	}
	return b.String() + "…"
}

// Build renders the body of a message: one attachment per alert, within
// Slack's limits (see the package doc). What comes from labels and
// annotations is escaped (&amp;, &lt;, &gt;), as Slack requires of text
// that is not markup: it shows as written, and a "<!channel>" in a summary
// notifies nobody. The markup the notifier writes itself is not escaped.
func Build(m *notify.Message, channel string) Message {
	verb := strings.ToUpper(m.Status)
	if m.Kind == notify.KindAcknowledge {
		verb = "ACKNOWLEDGED"
	}
	head := fmt.Sprintf("[%s %s] ", m.Severity, verb)
	tail := fmt.Sprintf(" (%d alerts)", len(m.Alerts))
	labels := escapeCut(m.GroupLabels.String(), MaxFieldLen-utf8.RuneCountInString(head+tail))
	out := Message{Channel: channel, Text: head + labels + tail}
	budget := MaxMessageLen - utf8.RuneCountInString(out.Text)
	for i, a := range m.Alerts {
		color := map[alerts.Severity]string{alerts.P0: "danger", alerts.P1: "warning", alerts.P2: "#439FE0"}[a.Severity()]
		if a.Status == notify.StatusResolved {
			color = "good"
		}
		title := a.Annotations["summary"]
		if title == "" {
			title = a.Labels["alertname"]
		}
		prefix := "[" + a.Status + "] "
		att := Attachment{Color: color, Title: prefix + escapeCut(title, MaxFieldLen-utf8.RuneCountInString(prefix)),
			Text: escapeCut(a.Annotations["description"], MaxFieldLen)}
		cost := utf8.RuneCountInString(att.Title) + utf8.RuneCountInString(att.Text)
		// Unless this is the last alert, room stays for the attachment
		// counting the ones left out.
		slots, room := MaxAttachments-len(out.Attachments), budget-cost
		if i < len(m.Alerts)-1 {
			slots, room = slots-1, room-moreLen
		}
		if slots < 1 || room < 0 {
			out.Attachments = append(out.Attachments, Attachment{Color: "#808080",
				Title: fmt.Sprintf("… and %d more alerts", len(m.Alerts)-i)})
			break
		}
		out.Attachments = append(out.Attachments, att)
		budget -= cost
	}
	return out
}

// Notify implements notify.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	return notify.PostJSON(ctx, n.client, n.c.URL, nil, Build(m, n.c.Channel))
}
