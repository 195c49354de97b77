package configstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
)

// MaskPrefix starts every masked value: "<masked>" or, for URLs,
// "<masked:host>" (config.MaskSecret).
const MaskPrefix = config.MaskPrefix

// IsMasked reports whether v has the form of a mask written by Mask; any
// other value is a secret, one that merely starts like a mask included.
func IsMasked(v string) bool { return config.IsMask(v) }

// secret is one secret value in a document: receivers[recv].kind.field,
// its decoded value and the byte span of its JSON string. A dest entry is
// not a secret but a field saying where the receiver's secrets are sent
// (config.DestinationField).
type secret struct {
	recv        int
	kind, field string
	value       string
	start, end  int
	dest        bool
}

// scanSecrets walks a JSON document and returns its receivers' secrets and
// destination fields, in document order, and names (by index).
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
			start := before + bytes.IndexByte(w.doc[before:], '"')
			// PagerDuty's url is both: a secret and where the key goes.
			if kind, field, ok := config.SecretField(path[2], path[3]); ok {
				w.secrets = append(w.secrets, secret{recv: i, kind: kind, field: field, value: t,
					start: start, end: int(w.dec.InputOffset())})
			}
			if kind, field, ok := config.DestinationField(path[2], path[3]); ok {
				w.secrets = append(w.secrets, secret{recv: i, kind: kind, field: field, value: t,
					start: start, end: int(w.dec.InputOffset()), dest: true})
			}
		}
	}
	return nil
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
	return maskSecrets(doc, secrets, nil, ""), nil
}

// maskSecrets replaces the secrets of doc (scanSecrets) by their masks,
// followed by note where notes says so.
func maskSecrets(doc string, secrets []secret, notes []bool, note string) string {
	out := doc
	for i, s := range slices.Backward(secrets) {
		if s.dest || s.value == "" || IsMasked(s.value) {
			continue
		}
		m := config.MaskSecret(s.field, s.value)
		if notes != nil && notes[i] {
			m += " " + note
		}
		out = out[:s.start] + quote(m) + out[s.end:]
	}
	return out
}

// MaskChanged is Mask(doc), except that a secret whose mask equals the
// mask of the same receiver's secret in base (by receiver name, kind and
// field, the k-th with the k-th) while the secret differs is shown as its
// mask followed by note: a comparison of the masked documents then shows
// a secret changed behind the same mask.
func MaskChanged(doc, base, note string) (string, error) {
	secrets, names, err := scanSecrets([]byte(doc))
	if err != nil {
		return "", fmt.Errorf("%w: document: %v", alerts.ErrInvalid, err)
	}
	baseSecrets, baseNames, err := scanSecrets([]byte(base))
	if err != nil {
		return "", fmt.Errorf("%w: base document: %v", alerts.ErrInvalid, err)
	}
	type slot struct {
		name, kind, field string
		nth               int
	}
	saved := map[slot]string{}
	seen := map[slot]int{}
	for _, b := range baseSecrets {
		if !b.dest {
			k := slot{baseNames[b.recv], b.kind, b.field, 0}
			k.nth = seen[k]
			seen[k]++
			saved[k] = b.value
		}
	}
	clear(seen)
	notes := make([]bool, len(secrets))
	for i, s := range secrets {
		if !s.dest {
			k := slot{names[s.recv], s.kind, s.field, 0}
			k.nth = seen[k]
			seen[k]++
			b, ok := saved[k]
			notes[i] = ok && b != s.value && config.MaskSecret(s.field, b) == config.MaskSecret(s.field, s.value)
		}
	}
	return maskSecrets(doc, secrets, notes, note), nil
}

// Unmask replaces each masked secret of doc by the secret the receiver of
// the same name and kind holds in base, byte for byte. A mask keeps a
// saved secret only when it is that secret's mask, unchanged (a mask moved
// to another receiver, or edited, names another secret), and only while
// the receiver still sends it to the same place: its destination fields
// (PagerDuty's url, e-mail's smarthost) as saved. Any other mask is
// refused, naming the field. A document that is not JSON is returned as it
// is, for config.Parse to report where it breaks.
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
	baseDest := map[slot]string{}
	for _, b := range baseSecrets {
		k := slot{baseNames[b.recv], b.kind, b.field}
		if b.dest {
			baseDest[k] = b.value // the last of a key is the one in force
			continue
		}
		byBase[k] = append(byBase[k], b)
	}
	// where: a field of the receiver at an index of doc.
	type where struct {
		recv        int
		kind, field string
	}
	dest := map[where]string{}
	seen := map[slot]int{}
	nth := make([]int, len(secrets))
	for i, s := range secrets {
		k := slot{names[s.recv], s.kind, s.field}
		if s.dest {
			dest[where{s.recv, s.kind, s.field}] = s.value
			continue
		}
		nth[i] = seen[k]
		seen[k]++
	}
	// Check every mask in document order (the first bad one is named),
	// then put the saved secrets back from the end.
	keep := make([]*secret, len(secrets))
	for j, s := range secrets {
		if s.dest || !IsMasked(s.value) {
			continue
		}
		name := names[s.recv]
		at := fmt.Sprintf("receivers[%d].%s.%s", s.recv, s.kind, s.field)
		cands := byBase[slot{name, s.kind, s.field}]
		if nth[j] >= len(cands) {
			return "", fmt.Errorf("%w: %s: the value is masked, but no saved receiver %q has one to keep; enter it",
				alerts.ErrInvalid, at, name)
		}
		b := cands[nth[j]]
		if want := config.MaskSecret(b.field, b.value); s.value != want {
			return "", fmt.Errorf("%w: %s: %s is not the mask of the saved secret of receiver %q (%s); enter the value",
				alerts.ErrInvalid, at, s.value, name, want)
		}
		for _, f := range config.DestinationFields(s.kind) {
			now, saved := dest[where{s.recv, s.kind, f}], baseDest[slot{name, s.kind, f}]
			// A destination that is itself a secret may come back as its
			// mask: it keeps its saved value (or is refused) as a secret.
			_, _, secretToo := config.SecretField(s.kind, f)
			kept := secretToo && saved != "" && now == config.MaskSecret(f, saved)
			if now != saved && !kept {
				return "", fmt.Errorf("%w: %s: the value is masked, but %s.%s changed since it was saved; enter the secret again to send it there",
					alerts.ErrInvalid, at, s.kind, f)
			}
		}
		keep[j] = &b
	}
	out := doc
	for j, s := range slices.Backward(secrets) {
		if b := keep[j]; b != nil {
			out = out[:s.start] + base[b.start:b.end] + out[s.end:]
		}
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
			row.Kind, row.Target = "pagerduty", "routing key "+config.MaskSecret("routing_key", r.PagerDuty.RoutingKey)
			if r.PagerDuty.URL != "" {
				row.Target += " via " + config.MaskSecret("url", r.PagerDuty.URL)
			}
		case r.Slack != nil:
			row.Kind, row.Target = "slack", config.MaskSecret("url", r.Slack.URL)
			if r.Slack.Channel != "" {
				row.Target += " " + r.Slack.Channel
			}
		case r.Webhook != nil:
			row.Kind, row.Target = "webhook", config.MaskSecret("url", r.Webhook.URL)
		case r.Alertmanager != nil:
			row.Kind, row.Target = "alertmanager", config.MaskSecret("url", r.Alertmanager.URL)
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
