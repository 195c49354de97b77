package configstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
)

// secretFields names the secret field of each receiver kind: a routing key,
// a password, or a URL that carries its token (Slack, webhooks).
var secretFields = map[string]string{
	"pagerduty":    "routing_key",
	"slack":        "url",
	"webhook":      "url",
	"alertmanager": "url",
	"email":        "password",
}

// MaskPrefix starts every masked value: "<masked>" or, for URLs,
// "<masked:host>".
const MaskPrefix = "<masked"

// IsMasked reports whether v is a mask written by Mask.
func IsMasked(v string) bool { return strings.HasPrefix(v, MaskPrefix) && strings.HasSuffix(v, ">") }

// maskOf is the mask of a secret: URLs keep their host, which is not secret
// and tells receivers apart.
func maskOf(field, v string) string {
	if field == "url" {
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			return MaskPrefix + ":" + u.Host + ">"
		}
	}
	return MaskPrefix + ">"
}

// secret is one secret value in a document: receivers[recv].kind.field,
// its decoded value and the byte span of its JSON string.
type secret struct {
	recv        int
	kind, field string
	value       string
	start, end  int
}

// scanSecrets walks a JSON document and returns its receivers' secrets and
// names (by index).
func scanSecrets(doc []byte) ([]secret, map[int]string, error) {
	w := walker{doc: doc, dec: json.NewDecoder(bytes.NewReader(doc)), names: map[int]string{}}
	w.dec.UseNumber()
	if err := w.value(nil); err != nil {
		return nil, nil, err
	}
	return w.secrets, w.names, nil
}

type walker struct {
	doc     []byte
	dec     *json.Decoder
	secrets []secret
	names   map[int]string
}

func (w *walker) value(path []string) error {
	before := int(w.dec.InputOffset())
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			for w.dec.More() {
				kt, err := w.dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				if err := w.value(append(slices.Clip(path), key)); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; w.dec.More(); i++ {
				if err := w.value(append(slices.Clip(path), strconv.Itoa(i))); err != nil {
					return err
				}
			}
		}
		_, err := w.dec.Token() // the closing delimiter
		return err
	case string:
		// Keys compare as encoding/json matches them to fields, ignoring
		// case: config.Parse reads "URL" as url, so it is masked too.
		if len(path) < 3 || !strings.EqualFold(path[0], "receivers") {
			return nil
		}
		i, err := strconv.Atoi(path[1])
		if err != nil {
			return nil
		}
		switch {
		case len(path) == 3 && strings.EqualFold(path[2], "name"):
			w.names[i] = t
		case len(path) == 4:
			kind, field, ok := secretField(path[2], path[3])
			if !ok {
				return nil
			}
			start := before + bytes.IndexByte(w.doc[before:], '"')
			w.secrets = append(w.secrets, secret{recv: i, kind: kind, field: field, value: t,
				start: start, end: int(w.dec.InputOffset())})
		}
	}
	return nil
}

// secretField returns the receiver kind and secret field that the keys
// kind and field name, as encoding/json matches keys: ignoring case.
func secretField(kind, field string) (string, string, bool) {
	for k, f := range secretFields {
		if strings.EqualFold(kind, k) && strings.EqualFold(field, f) {
			return k, f, true
		}
	}
	return "", "", false
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// Mask returns the document with every receiver secret replaced by its mask,
// keeping the rest of the text as it is. A document that is not JSON is
// refused (saved documents always are).
func Mask(doc string) (string, error) {
	secrets, _, err := scanSecrets([]byte(doc))
	if err != nil {
		return "", fmt.Errorf("%w: document: %v", alerts.ErrInvalid, err)
	}
	out := doc
	for _, s := range slices.Backward(secrets) {
		if s.value == "" || IsMasked(s.value) {
			continue
		}
		out = out[:s.start] + quote(maskOf(s.field, s.value)) + out[s.end:]
	}
	return out, nil
}

// Unmask replaces each masked secret of doc by the secret the receiver of
// the same name holds in base, byte for byte. A mask without a saved secret
// to keep is refused, naming the field. A document that is not JSON is
// returned as it is, for config.Parse to report where it breaks.
func Unmask(doc, base string) (string, error) {
	secrets, names, err := scanSecrets([]byte(doc))
	if err != nil {
		return doc, nil
	}
	var baseSecrets []secret
	var baseNames map[int]string
	if base != "" {
		if baseSecrets, baseNames, err = scanSecrets([]byte(base)); err != nil {
			return "", fmt.Errorf("%w: base document: %v", alerts.ErrStore, err)
		}
	}
	// The k-th secret of a receiver name and field takes the k-th of base
	// (names are unique in a valid document; this keeps others stable).
	type slot struct{ name, kind, field string }
	byBase := map[slot][]secret{}
	for _, b := range baseSecrets {
		k := slot{baseNames[b.recv], b.kind, b.field}
		byBase[k] = append(byBase[k], b)
	}
	seen := map[slot]int{}
	nth := make([]int, len(secrets))
	for i, s := range secrets {
		k := slot{names[s.recv], s.kind, s.field}
		nth[i] = seen[k]
		seen[k]++
	}
	out := doc
	for j, s := range slices.Backward(secrets) {
		if !IsMasked(s.value) {
			continue
		}
		name := names[s.recv]
		cands := byBase[slot{name, s.kind, s.field}]
		i := nth[j]
		if i >= len(cands) {
			return "", fmt.Errorf("%w: receivers[%d].%s.%s: the value is masked, but no saved receiver %q has one to keep; enter it",
				alerts.ErrInvalid, s.recv, s.kind, s.field, name)
		}
		b := cands[i]
		out = out[:s.start] + base[b.start:b.end] + out[s.end:]
	}
	return out, nil
}

// ReceiverRow is a receiver as the settings page lists it, secrets masked.
type ReceiverRow struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Target says where it sends, secrets masked.
	Target string `json:"target"`
}

// RouteRow is a route as the settings page lists it.
type RouteRow struct {
	Receiver   string `json:"receiver"`
	Matchers   string `json:"matchers,omitempty"`
	Severities string `json:"severities,omitempty"`
	GroupBy    string `json:"group_by,omitempty"`
	Continue   bool   `json:"continue,omitempty"`
}

// Summary lists a configuration's receivers and routes, secrets masked.
type Summary struct {
	Receivers []ReceiverRow `json:"receivers"`
	Routes    []RouteRow    `json:"routes"`
	Rules     int           `json:"rules"`
	// Warnings are config.Config.Warnings: accepted, yet worth a look
	// (a repeat interval below the group interval, say); [] when none.
	Warnings []string `json:"warnings"`
}

// Summarize lists c's receivers and routes, with one receiver and no
// routes the implied route to it, and c's warnings.
func Summarize(c *config.Config) Summary {
	s := Summary{Receivers: []ReceiverRow{}, Routes: []RouteRow{}, Rules: len(c.RuleSet()),
		Warnings: c.Warnings()}
	for _, r := range c.Receivers {
		row := ReceiverRow{Name: r.Name}
		switch {
		case r.PagerDuty != nil:
			row.Kind, row.Target = "pagerduty", "routing key "+maskOf("routing_key", r.PagerDuty.RoutingKey)
			if r.PagerDuty.URL != "" {
				row.Target += " via " + r.PagerDuty.URL
			}
		case r.Slack != nil:
			row.Kind, row.Target = "slack", maskOf("url", r.Slack.URL)
			if r.Slack.Channel != "" {
				row.Target += " " + r.Slack.Channel
			}
		case r.Webhook != nil:
			row.Kind, row.Target = "webhook", maskOf("url", r.Webhook.URL)
		case r.Alertmanager != nil:
			row.Kind, row.Target = "alertmanager", maskOf("url", r.Alertmanager.URL)
		case r.Email != nil:
			row.Kind, row.Target = "email", strings.Join(r.Email.To, ", ")+" via "+r.Email.Smarthost
		}
		s.Receivers = append(s.Receivers, row)
	}
	for _, r := range c.Routes {
		row := RouteRow{Receiver: r.Receiver, Continue: r.Continue, GroupBy: strings.Join(r.GroupBy, ", ")}
		if len(r.Matchers) > 0 {
			row.Matchers = r.Matchers.String()
		}
		sev := make([]string, 0, len(r.Severities))
		for _, v := range r.Severities {
			sev = append(sev, string(v))
		}
		sort.Strings(sev)
		row.Severities = strings.Join(sev, ", ")
		s.Routes = append(s.Routes, row)
	}
	if len(c.Routes) == 0 && len(c.Receivers) == 1 {
		s.Routes = append(s.Routes, RouteRow{Receiver: c.Receivers[0].Name})
	}
	return s
}
