package alerts

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseMatchers(t *testing.T) {
	tests := []struct {
		in      string
		labels  Labels
		match   bool
		wantErr string
	}{
		{in: `service="checkout"`, labels: Labels{"service": "checkout"}, match: true},
		{in: `{service="checkout", severity=~"P1|P2"}`, labels: Labels{"service": "checkout", "severity": "P2"}, match: true},
		{in: `{severity=~"P1|P2"}`, labels: Labels{"severity": "P0"}, match: false},
		{in: `severity=~"P"`, labels: Labels{"severity": "P0"}, match: false}, // anchored
		{in: `a!="x",b!~"y.*"`, labels: Labels{"a": "z", "b": "q"}, match: true},
		{in: `a!="x"`, labels: Labels{"a": "x"}, match: false},
		{in: `missing=""`, labels: Labels{}, match: true},
		{in: `{a="q\"uote"}`, labels: Labels{"a": `q"uote`}, match: true},
		{in: ``, wantErr: "empty list"},
		{in: `{}`, wantErr: "empty list"},
		{in: `a=x`, wantErr: "position 2: expected a double-quoted value"},
		{in: `{a="x"`, wantErr: "position 6: expected '}'"},
		{in: `a=~"("`, wantErr: "position 3:"},
		{in: `a=~"x)|(.*"`, wantErr: `position 3: matcher a=~"x)|(.*": not a regular expression: unexpected )`},
		{in: `1a="x"`, wantErr: "position 0: expected a label name"},
		{in: `a<"x"`, wantErr: "position 1: expected one of"},
		{in: `a="x`, wantErr: "position 2: unterminated string"},
		{in: `a="x" b="y"`, wantErr: "position 6: unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ms, err := ParseMatchers(tt.in)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseMatchers(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMatchers(%q): %v", tt.in, err)
			}
			if got := ms.Matches(tt.labels); got != tt.match {
				t.Fatalf("%s.Matches(%v) = %v, want %v", ms, tt.labels, got, tt.match)
			}
			again, err := ParseMatchers(ms.String())
			if err != nil || again.String() != ms.String() {
				t.Fatalf("round trip of %s: %v %v", ms, again, err)
			}
		})
	}
}

// TestRegexpMatcherRefusesValueThatEscapesAnchors: a value that is not a
// regular expression on its own, such as x)|(.*, must not compile through
// the anchoring wrapper and match every alert.
func TestRegexpMatcherRefusesValueThatEscapesAnchors(t *testing.T) {
	for _, v := range []string{`x)|(.*`, `a)(b`, `)`} {
		for _, typ := range []MatchType{MatchRegexp, MatchNotRegexp} {
			m, err := NewMatcher(typ, "alertname", v)
			if err == nil {
				t.Fatalf("NewMatcher(%s, %q) accepted; matches {alertname=\"y\"}: %v", typ, v, m.Matches(Labels{"alertname": "y"}))
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "alertname") || !strings.Contains(err.Error(), `"`+v+`"`) ||
				strings.Contains(err.Error(), "^(?:") {
				t.Fatalf("NewMatcher(%q) error %q: want ErrInvalid naming the label and quoting the value as given", v, err)
			}
		}
		ms, err := ParseMatchers(`{alertname=~"` + strings.ReplaceAll(v, `\`, `\\`) + `"}`)
		if err == nil {
			t.Fatalf("ParseMatchers accepted %q as %s", v, ms)
		}
		if strings.Contains(err.Error(), "^(?:") {
			t.Fatalf("ParseMatchers(%q) error %q quotes the anchored form", v, err)
		}
	}
}

// TestParseMatchersErrorsShowTheCharacterFound: an error on input with
// characters beyond ASCII quotes whole characters, and says which one it
// found where it expected a name or a quote: a no-break space or a
// typographic quote pasted from a chat looks like the right one.
func TestParseMatchersErrorsShowTheCharacterFound(t *testing.T) {
	tests := []struct{ in, want string }{
		{`a="x" ✓✓✓✓`, `position 6: unexpected "✓✓✓✓"`},
		{`{a="x"} héhéhéhéhé`, `position 8: unexpected "héhéhéhé"`},
		{"a=\"x\",\u00a0b=\"y\"", `position 6: expected a label name, found "\u00a0"`},
		{`service=“checkout”`, `position 8: expected a double-quoted value, found "“"`},
	}
	for _, tt := range tests {
		_, err := ParseMatchers(tt.in)
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Fatalf("ParseMatchers(%q) = %v, want an invalid-input error", tt.in, err)
		}
		if !utf8.ValidString(err.Error()) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseMatchers(%q) error %q, want valid UTF-8 containing %q", tt.in, err, tt.want)
		}
	}
}

func FuzzParseMatchers(f *testing.F) {
	for _, s := range []string{`a="b"`, `{a=~"b|c", d!="e"}`, `{`, `a="\u00e9"`, `x!~".*"`, `a="b",`, `a=~"x)|(.*"`, `a!~"(?i)x|y"`,
		`a="x" ✓✓✓✓`, "a=\"x\",\u00a0b=\"y\"", `service=“checkout”`, "a=\"x\" \xff\xfe",
		`job=~"\Q"`, `a=~"\\Q"`, `a=~"\\Qa.b"`, `a=~"x\\Qa\\"`, `a=~"(?<x>"`, `a=~"\p"`, `a=~"\\p"`, `a=~"["`, `a=~"(?=x)"`,
		`a=~"(a)\\1"`, `a=~"a{1001}"`, "a=\"x\ny\"", `a="\400"`, `a="x\'"`, `a="\x4"`, "a=\"\\\u00a0\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseMatchers(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without sentinel: %v", err)
			}
			// What the error quotes of valid input is whole characters.
			if utf8.ValidString(s) && !utf8.ValidString(err.Error()) {
				t.Fatalf("ParseMatchers(%q) error %q is not valid UTF-8", s, err)
			}
			return
		}
		for _, m := range ms {
			// A regular expression is one on its own, not only once
			// anchored: x)|(.* would match everything.
			if _, err := regexp.Compile(m.Value); (m.Type == MatchRegexp || m.Type == MatchNotRegexp) && err != nil {
				t.Fatalf("%s accepted, but %q alone is not a regular expression: %v", m, m.Value, err)
			}
		}
		again, err := ParseMatchers(ms.String())
		if err != nil {
			t.Fatalf("rendered %q does not parse: %v", ms.String(), err)
		}
		if again.String() != ms.String() {
			t.Fatalf("round trip changed %q to %q", ms.String(), again.String())
		}
	})
}

// A regular expression that does not compile is refused with an error that
// names the matcher and says what is wrong in plain words: the part at
// fault unless it is the whole value, no empty quotes, and what Go's RE2
// syntax lacks.
func TestRegexpMatcherErrorSaysWhatIsWrong(t *testing.T) {
	tests := []struct{ value, want string }{
		{`\p`, `matcher job=~"\\p": not a regular expression: unknown Unicode class: want a category or script, such as \pL or \p{Greek}`},
		{`a\pXb`, `not a regular expression: unknown Unicode class "\\pX": want`},
		{`[`, `matcher job=~"[": not a regular expression: missing closing ]`},
		{`a[b`, `not a regular expression: missing closing ] "[b"`},
		{`(?<x>`, `matcher job=~"(?<x>": not a regular expression: missing closing )`},
		{`x\`, `not a regular expression: trailing backslash at end of expression`},
		{`(?=x)y`, `not a regular expression: lookahead or lookbehind "(?=": not supported by Go's RE2 syntax`},
		{`(?<=a)b`, `matcher job=~"(?<=a)b": not a regular expression: lookahead or lookbehind: not supported by Go's RE2 syntax`},
		{`(a)\1`, `not a regular expression: backreference "\\1": not supported by Go's RE2 syntax`},
		{`a{1001}`, `not a regular expression: invalid repeat count "{1001}": want {n}, {n,} or {n,m} with n <= m <= 1000`},
		{`*a`, `not a regular expression: missing argument to repetition operator "*": nothing before it to repeat`},
		{`[[:foo:]]`, `not a regular expression: unknown character class "[:foo:]": want a POSIX class`},
		// Deep enough to pass alone, too deep inside the anchoring group.
		{strings.Repeat("(", 999) + strings.Repeat(")", 999), `not a regular expression once anchored: expression nests too deeply`},
	}
	for _, tt := range tests {
		_, err := NewMatcher(MatchRegexp, "job", tt.value)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewMatcher(=~, %.40q) error %.200q, want one containing %q", tt.value, err, tt.want)
			continue
		}
		if strings.HasSuffix(err.Error(), `""`) || strings.HasSuffix(err.Error(), ": ") || strings.Contains(err.Error(), "error parsing regexp") {
			t.Errorf("NewMatcher(=~, %.40q) error %.200q", tt.value, err)
		}
	}
}

// \Q quotes text up to \E or the end of the value; without \E it must not
// quote the anchors too, which refused a valid expression with no reason.
func TestRegexpMatcherQuoteToTheEnd(t *testing.T) {
	tests := []struct {
		value string
		match map[string]bool
	}{
		{`\Qa.b`, map[string]bool{"a.b": true, "axb": false, "a.bc": false, "": false}},
		{`\Q`, map[string]bool{"": true, "Q": false}},
		{`x|\Q(y)`, map[string]bool{"x": true, "(y)": true, "y": false}},
		{`\Qa\`, map[string]bool{`a\`: true, "a": false}},
	}
	for _, tt := range tests {
		for _, typ := range []MatchType{MatchRegexp, MatchNotRegexp} {
			m, err := NewMatcher(typ, "a", tt.value)
			if err != nil {
				t.Fatalf("NewMatcher(%s, %q): %v", typ, tt.value, err)
			}
			for v, want := range tt.match {
				if got := m.Matches(Labels{"a": v}); got != (want == (typ == MatchRegexp)) {
					t.Errorf("%s matches %q: %v", m, v, got)
				}
			}
			again, err := ParseMatchers(m.String())
			if err != nil || len(again) != 1 || again[0].String() != m.String() {
				t.Errorf("round trip of %s: %v %v", m, again, err)
			}
		}
	}
}

// A backslash in a double-quoted value starts a Go escape: a regular
// expression's \d is written \\d. An escape Go has not is refused with an
// error that points at it and says what to write.
func TestParseMatchersNamesTheBadEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{`job=~"\Q"`, `position 6: invalid escape \Q in a double-quoted value: write \\Q for a literal backslash`},
		{`a=~"x\d+"`, `position 5: invalid escape \d in a double-quoted value: write \\d for a literal backslash`},
		{`a="x\'"`, `position 4: invalid escape \' in a double-quoted value: write ' without a backslash`},
		{`a="\x4"`, `position 3: invalid escape \x: want 2 hex digits after it`},
		{`a="\ud800"`, `position 3: invalid escape \u: want 4 hex digits after it, naming a character`},
		{`a="\U00110000"`, `position 3: invalid escape \U: want 8 hex digits after it`},
		{`a="\400"`, `position 3: invalid escape \4: an octal escape is 3 octal digits, at most \377`},
		{"a=\"\\\u00a0\"", `position 3: invalid escape: a backslash before "\u00a0" in a double-quoted value`},
		{"a=\"x\ny\"", `position 4: line break in a double-quoted value: write \n`},
		{`a=~"\\p"`, `position 3: matcher a=~"\\p": not a regular expression: unknown Unicode class`},
	}
	for _, tt := range tests {
		_, err := ParseMatchers(tt.in)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseMatchers(%q) error %q, want one containing %q", tt.in, err, tt.want)
		}
	}
}

// An accepted regular expression matcher matches a value exactly when the
// expression, compiled on its own, matches the whole value: the anchors
// change nothing else.
func FuzzRegexpMatcherMatchesWholeValue(f *testing.F) {
	for _, s := range [][2]string{{`\Qa.b`, "a.b"}, {`\Q`, ""}, {`x|\Q(y)`, "(y)"}, {`a|b`, "ab"}, {`(?i)x`, "X"},
		{`(?m)^a$`, "a"}, {`a$|b`, "b"}, {`.*`, "\n"}, {`\Qa\`, `a\`}, {`\Qa\Eb`, "ab"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, value, s string) {
		m, err := NewMatcher(MatchRegexp, "a", value)
		if err != nil {
			return
		}
		re := regexp.MustCompile(value)
		re.Longest()
		loc := re.FindStringIndex(s)
		if want := loc != nil && loc[0] == 0 && loc[1] == len(s); m.Matches(Labels{"a": s}) != want {
			t.Fatalf("%s matches %q: %v, but %q alone matches the whole of it: %v", m, s, !want, value, want)
		}
	})
}

func TestFingerprintStable(t *testing.T) {
	a := Labels{"alertname": "x", "service": "s"}
	b := Labels{"service": "s", "alertname": "x"}
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("order changed the fingerprint")
	}
	if (Labels{"ab": "c"}).Fingerprint() == (Labels{"a": "bc"}).Fingerprint() {
		t.Fatal("concatenation collision")
	}
	f, err := ParseFingerprint(a.Fingerprint().String())
	if err != nil || f != a.Fingerprint() {
		t.Fatalf("fingerprint round trip: %v %v", f, err)
	}
}

// The fingerprint is FNV-1a over length-prefixed names and values, so it is
// stable across releases: stored acknowledgements and logs rely on it.
func TestFingerprintValue(t *testing.T) {
	h := fnv.New64a()
	for _, s := range []string{"alertname", "x", "service", "s"} {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	if got := (Labels{"service": "s", "alertname": "x"}).Fingerprint(); uint64(got) != h.Sum64() {
		t.Fatalf("fingerprint %x, want %x", uint64(got), h.Sum64())
	}
}
