package alerts

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MatchType is the operator of a matcher.
type MatchType int

// Matcher operators.
const (
	MatchEqual MatchType = iota
	MatchNotEqual
	MatchRegexp
	MatchNotRegexp
)

func (t MatchType) String() string {
	return [...]string{"=", "!=", "=~", "!~"}[t]
}

// Matcher tests one label. Regular expressions are anchored, as in
// Prometheus and Alertmanager.
type Matcher struct {
	Name  string
	Type  MatchType
	Value string
	re    *regexp.Regexp
}

// NewMatcher builds a matcher, compiling the regular expression of =~ and !~.
func NewMatcher(t MatchType, name, value string) (*Matcher, error) {
	if !validLabelName(name) {
		return nil, fmt.Errorf("%w: matcher: label name %q: want [a-zA-Z_][a-zA-Z0-9_]*", ErrInvalid, name)
	}
	m := &Matcher{Name: name, Type: t, Value: value}
	if t == MatchRegexp || t == MatchNotRegexp {
		// The value must be a regular expression on its own before it is
		// anchored: x)|(.* would otherwise close the anchoring group and
		// match every value, so a silence meant for one alert would
		// silence all.
		if _, err := regexp.Compile(value); err != nil {
			return nil, fmt.Errorf("%w: matcher %s%s%q: not a regular expression: %s", ErrInvalid, name, t, value, regexpProblem(value, err))
		}
		anchored := "^(?:" + value + ")$"
		re, err := regexp.Compile(anchored)
		if err != nil {
			// A \Q without \E quotes the rest of the value as text, and
			// would quote the anchors too: \E ends it where the value does.
			// Appended to anything else, \E is an invalid escape.
			var err2 error
			if re, err2 = regexp.Compile("^(?:" + value + `\E)$`); err2 != nil {
				// The anchors took it past a limit (nesting, size).
				return nil, fmt.Errorf("%w: matcher %s%s%q: not a regular expression once anchored: %s",
					ErrInvalid, name, t, value, regexpProblem(anchored, err))
			}
		}
		m.re = re
	}
	return m, nil
}

// regexpProblem says in plain words what is wrong with the expression
// value: the regexp package's description, then the part of value at
// fault unless that is all of it or nothing, and what to write instead
// where the description misleads or the syntax has no such feature. It
// leaves out the "error parsing regexp" prefix.
func regexpProblem(value string, err error) string {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	what, expr, hint := string(se.Code), se.Expr, ""
	switch {
	case se.Code == syntax.ErrInvalidCharRange && (strings.HasPrefix(expr, `\p`) || strings.HasPrefix(expr, `\P`)):
		what, hint = "unknown Unicode class", `want a category or script, such as \pL or \p{Greek}`
	case se.Code == syntax.ErrInvalidCharRange && strings.HasPrefix(expr, "[:"):
		what, hint = "unknown character class", "want a POSIX class, such as [:alpha:]"
	case (se.Code == syntax.ErrInvalidPerlOp || se.Code == syntax.ErrInvalidNamedCapture) &&
		(strings.HasPrefix(expr, "(?=") || strings.HasPrefix(expr, "(?!") || strings.HasPrefix(expr, "(?<=") || strings.HasPrefix(expr, "(?<!")):
		what, hint = "lookahead or lookbehind", "not supported by Go's RE2 syntax"
	case se.Code == syntax.ErrInvalidEscape && len(expr) == 2 && expr[1] >= '1' && expr[1] <= '9':
		what, hint = "backreference", "not supported by Go's RE2 syntax"
	case se.Code == syntax.ErrInvalidRepeatSize:
		hint = "want {n}, {n,} or {n,m} with n <= m <= 1000"
	case se.Code == syntax.ErrMissingRepeatArgument:
		hint = "nothing before it to repeat; escape it to match it literally"
	}
	if expr != "" && expr != value {
		what += " " + strconv.Quote(expr)
	}
	if hint != "" {
		what += ": " + hint
	}
	return what
}

// Matches tests the value of the label (empty when absent).
func (m *Matcher) Matches(l Labels) bool {
	v := l[m.Name]
	switch m.Type {
	case MatchEqual:
		return v == m.Value
	case MatchNotEqual:
		return v != m.Value
	case MatchRegexp:
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

func (m *Matcher) String() string { return m.Name + m.Type.String() + strconv.Quote(m.Value) }

// Matchers is a conjunction.
type Matchers []*Matcher

// Matches reports whether every matcher matches.
func (ms Matchers) Matches(l Labels) bool {
	for _, m := range ms {
		if !m.Matches(l) {
			return false
		}
	}
	return true
}

func (ms Matchers) String() string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// MarshalText renders the matchers in the syntax ParseMatchers reads.
func (ms Matchers) MarshalText() ([]byte, error) { return []byte(ms.String()), nil }

// UnmarshalText parses with ParseMatchers.
func (ms *Matchers) UnmarshalText(b []byte) error {
	p, err := ParseMatchers(string(b))
	if err != nil {
		return err
	}
	*ms = p
	return nil
}

// ParseMatchers reads a comma-separated list of matchers, optionally in
// braces: {service="checkout", severity=~"P1|P2"}. Values are double-quoted
// Go strings. An error names the byte offset of the problem.
func ParseMatchers(s string) (Matchers, error) {
	p := &matcherParser{s: s}
	p.space()
	braced := p.eat('{')
	var out Matchers
	for {
		p.space()
		if p.done() || (braced && p.peek() == '}') {
			break
		}
		m, err := p.matcher()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
		p.space()
		if !p.eat(',') {
			break
		}
	}
	p.space()
	if braced && !p.eat('}') {
		return nil, p.errorf("expected '}', found %s", p.found())
	}
	p.space()
	if !p.done() {
		return nil, p.errorf("unexpected %q", upTo(p.s[p.i:], 8))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: matchers: empty list", ErrInvalid)
	}
	return out, nil
}

type matcherParser struct {
	s string
	i int
}

func (p *matcherParser) done() bool { return p.i >= len(p.s) }
func (p *matcherParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *matcherParser) eat(c byte) bool {
	if p.peek() == c && !p.done() {
		p.i++
		return true
	}
	return false
}

func (p *matcherParser) space() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

// found says what is at the parser's position, for an error: the
// character, quoted (an invisible or typographic one, such as a no-break
// space or a curly quote, shows as such), or "the end".
func (p *matcherParser) found() string {
	if p.done() {
		return "the end"
	}
	_, n := utf8.DecodeRuneInString(p.s[p.i:])
	return strconv.Quote(p.s[p.i : p.i+n])
}

// upTo returns the first n characters of s.
func upTo(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

func (p *matcherParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: matchers: position %d: %s", ErrInvalid, p.i, fmt.Sprintf(format, args...))
}

func (p *matcherParser) matcher() (*Matcher, error) {
	start := p.i
	for !p.done() && isNameByte(p.s[p.i], p.i == start) {
		p.i++
	}
	name := p.s[start:p.i]
	if name == "" {
		return nil, p.errorf("expected a label name, found %s", p.found())
	}
	p.space()
	var t MatchType
	switch {
	case strings.HasPrefix(p.s[p.i:], "=~"):
		t = MatchRegexp
	case strings.HasPrefix(p.s[p.i:], "!~"):
		t = MatchNotRegexp
	case strings.HasPrefix(p.s[p.i:], "!="):
		t = MatchNotEqual
	case strings.HasPrefix(p.s[p.i:], "="):
		t = MatchEqual
	default:
		return nil, p.errorf("expected one of = != =~ !~ after %q, found %s", name, p.found())
	}
	p.i += len(t.String())
	p.space()
	if p.peek() != '"' {
		return nil, p.errorf("expected a double-quoted value, found %s", p.found())
	}
	vstart := p.i
	p.i++
	for !p.done() && p.s[p.i] != '"' {
		if p.s[p.i] == '\\' {
			p.i++
		}
		p.i++
	}
	if p.done() {
		p.i = vstart
		return nil, p.errorf("unterminated string")
	}
	p.i++
	value, err := strconv.Unquote(p.s[vstart:p.i])
	if err != nil {
		return nil, p.badValue(vstart, err)
	}
	m, err := NewMatcher(t, name, value)
	if err != nil {
		p.i = vstart
		return nil, p.errorf("%v", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
	}
	return m, nil
}

// badValue says why the double-quoted value p.s[start:p.i] does not
// unquote (err) and moves the parser to the fault: an escape that Go
// strings do not have (a regular expression's \d is written \\d) or a
// line break.
func (p *matcherParser) badValue(start int, err error) error {
	end := p.i - 1 // the closing quote
	for i := start + 1; i < end; {
		c := p.s[i]
		switch {
		case c == '\n':
			p.i = i
			return p.errorf(`line break in a double-quoted value: write \n`)
		case c == '\\':
			_, _, rest, uerr := strconv.UnquoteChar(p.s[i:end], '"')
			if uerr == nil {
				i = end - len(rest)
				continue
			}
			p.i = i
			r, size := utf8.DecodeRuneInString(p.s[i+1 : end])
			esc := p.s[i : i+1+size]
			switch {
			case r == 'x':
				return p.errorf(`invalid escape \x: want 2 hex digits after it`)
			case r == 'u':
				return p.errorf(`invalid escape \u: want 4 hex digits after it, naming a character`)
			case r == 'U':
				return p.errorf(`invalid escape \U: want 8 hex digits after it, naming a character`)
			case r == '\'':
				return p.errorf(`invalid escape \' in a double-quoted value: write ' without a backslash`)
			case r >= '0' && r <= '7':
				return p.errorf(`invalid escape %s: an octal escape is 3 octal digits, at most \377`, esc)
			case r == utf8.RuneError && size == 1 || !unicode.IsGraphic(r) || unicode.IsSpace(r):
				return p.errorf(`invalid escape: a backslash before %s in a double-quoted value: write \\ for a literal backslash`,
					strconv.Quote(p.s[i+1:i+1+size]))
			}
			return p.errorf(`invalid escape %s in a double-quoted value: write \%s for a literal backslash`, esc, esc)
		default: // no byte of a multi-byte character is '\n' or '\\'
			i++
		}
	}
	p.i = start
	return p.errorf("bad string: %v", err)
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

func validLabelName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0) {
			return false
		}
	}
	return true
}
