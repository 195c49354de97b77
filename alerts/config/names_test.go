package config

import (
	"errors"
	"strings"
	"testing"

	"governor.dev/governor/alerts"
)

// A receiver name is what the UI, the logs and the metrics show and what
// routes refer to: a control or invisible character (a NUL or a newline
// pasted from a terminal, a zero-width space from a wiki page), a leading or
// trailing space or a name too long to show is refused, naming the receiver
// and the character; the names used in the examples stay valid.
func TestParseRefusesReceiverNamesThatDoNotShowAsWritten(t *testing.T) {
	doc := func(name string) string {
		return `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}, {"name": "` + name + `", "webhook": {"url": "http://h/"}}],
		  "routes": [{"receiver": "w"}]}`
	}
	tests := []struct{ name, json, want string }{
		{"nul", `pa\u0000ger`, `receivers[1]: name "pa\x00ger": character 3 is U+0000, a control or invisible character`},
		{"newline", `pager\n`, `receivers[1]: name "pager\n": character 6 is U+000A, a control or invisible character`},
		{"tab", `\tpager`, `receivers[1]: name "\tpager": character 1 is U+0009`},
		{"delete", `pager\u007f`, `U+007F`},
		{"zero-width space", `pager\u200b`, `receivers[1]: name "pager\u200b": character 6 is U+200B`},
		{"no-break space", `team\u00a0pager`, `U+00A0`},
		{"trailing space", `pager `, `receivers[1]: name "pager ": leading or trailing space`},
		{"leading space", ` pager`, `receivers[1]: name " pager": leading or trailing space`},
		{"too long", strings.Repeat("x", 129), `receivers[1]: name "xxxx`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(doc(tt.json)))
			if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, tt.want)
			}
		})
	}
	if _, err := Parse([]byte(doc(strings.Repeat("x", 129)))); err == nil || !strings.Contains(err.Error(), "129 characters, at most 128") {
		t.Fatalf("129-character name: %v, want an error giving the length and the bound", err)
	}
	for _, ok := range []string{"pager", "team pager", "checkout-oncall", "équipe.paiement", "am_2", "<default receiver>", strings.Repeat("é", 128)} {
		if _, err := Parse([]byte(doc(ok))); err != nil {
			t.Errorf("receiver name %q refused: %v", ok, err)
		}
	}
}

// Two receivers with one name are refused naming both positions, so that
// the person editing a long list finds the other one.
func TestParseRefusesDuplicateReceiverNamingBothPositions(t *testing.T) {
	doc := `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}, {"name": "x", "webhook": {"url": "http://h/"}},
	  {"name": "w", "slack": {"url": "http://h/"}}], "routes": [{"receiver": "w"}]}`
	_, err := Parse([]byte(doc))
	if want := `receivers[2]: name "w" is used twice: receivers[0] and receivers[2]`; !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, want)
	}
}

// A route naming a receiver that does not exist is refused with the
// route's position and the names that do exist, quoted so that a stray
// space shows.
func TestParseRefusesRouteToUndefinedReceiverListingTheDefinedOnes(t *testing.T) {
	doc := `{"routes": [{"receiver": "w"}, {"receiver": "pager "}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}},
	  {"name": "pager", "pagerduty": {"routing_key": "k"}}]}`
	_, err := Parse([]byte(doc))
	if want := `routes[1]: receiver "pager " is not defined; receivers are "pager", "w"`; !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, want)
	}
}

// group_by and equal name labels: one that is not a label name is refused
// with the path of the entry (the position of its route or rule, then its
// field).
func TestParseRefusesLabelNamesWithTheirPath(t *testing.T) {
	const recv = `"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]`
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"group_by", `{"routes": [{"receiver": "w", "group_by": ["service", "service-name"]}], ` + recv + `}`,
			[]string{`routes[0]: `, `group_by[1]: "service-name" is not a label name`}},
		{"group_by empty", `{"routes": [{"receiver": "w", "group_by": [""]}], ` + recv + `}`,
			[]string{`routes[0]: `, `group_by[0]: "" is not a label name`}},
		{"equal", `{"inhibit_rules": [{"source": "a=\"b\"", "target": "c=\"d\"", "equal": ["service", "x y"]}], ` + recv + `}`,
			[]string{`inhibit_rules[0]: `, `equal[1]: "x y" is not a label name`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if !errors.Is(err, alerts.ErrInvalid) {
				t.Fatalf("Parse() = %v, want an invalid-input error", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("Parse() = %v, want an error containing %q", err, want)
				}
			}
		})
	}
}

// A rule error names the rule's position in the document, not in the set
// with the built-in rules before it ("rules[13]" in a document of two).
func TestParseNamesTheRuleByItsPositionInTheDocument(t *testing.T) {
	doc := `{"rules": [{"name": "A", "expr": "up", "severity": "P1"}, {"name": "B", "expr": "up", "severity": "P7"}],
	  "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`
	_, err := Parse([]byte(doc))
	if want := `rules[1]: alerts: invalid input: rule "B": severity`; !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, want)
	}
}

// Two rules of the document with one name are refused: the second silently
// replaced the first, which then never fired.
func TestParseRefusesDuplicateRuleNames(t *testing.T) {
	for _, name := range []string{"A", "GovernorLoadHigh"} { // new, and overriding a built-in
		doc := `{"rules": [{"name": "` + name + `", "expr": "up", "severity": "P1"}, {"name": "` + name + `", "expr": "up == 0", "severity": "P0"}],
		  "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`
		_, err := Parse([]byte(doc))
		if want := `rules[1]: name "` + name + `" is used twice: rules[0] and rules[1]`; !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse() = %v, want an invalid-input error containing %q", err, want)
		}
	}
}

// A rule name is the alertname label: "GovernorLoadHigh " (a trailing
// space) would run beside the built-in rule instead of replacing it, so it
// is refused as receiver names are.
func TestParseRefusesRuleNamesThatDoNotShowAsWritten(t *testing.T) {
	for name, want := range map[string]string{
		`GovernorLoadHigh `: `rules[0]: name "GovernorLoadHigh ": leading or trailing space`,
		`Checkout\nErrors`:  `rules[0]: name "Checkout\nErrors": character 9 is U+000A`,
	} {
		doc := `{"rules": [{"name": "` + name + `", "expr": "up", "severity": "P1"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`
		_, err := Parse([]byte(doc))
		if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse() = %v, want an invalid-input error containing %q", err, want)
		}
	}
}

// TestParseAcceptsGroupByAllLabels: group_by ["..."] is Alertmanager's
// "group by every label"; with other names it is refused with its path.
func TestParseAcceptsGroupByAllLabels(t *testing.T) {
	const recv = `"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]`
	c, err := Parse([]byte(`{"routes": [{"receiver": "w", "group_by": ["..."]}], ` + recv + `}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := c.Routes[0].GroupBy; len(got) != 1 || got[0] != "..." {
		t.Fatalf("group_by %q", got)
	}
	_, err = Parse([]byte(`{"routes": [{"receiver": "w", "group_by": ["service", "..."]}], ` + recv + `}`))
	if want := `routes[0]: alerts: invalid input: route w: group_by[1]: "..." groups by every label and must be the only name`; !errors.Is(err, alerts.ErrInvalid) ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, want)
	}
}
