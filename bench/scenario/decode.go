package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"governor.dev/governor/sdk/rules"
)

// ErrInvalid is wrapped by every decoding and validation error.
var ErrInvalid = errors.New("scenario: invalid scenario")

// MaxBytes bounds a scenario file.
const MaxBytes = 1 << 20

// FieldError is one problem with one field, named by its JSON path.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// ValidationError lists every problem found.
type ValidationError struct{ Errors []FieldError }

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	return ErrInvalid.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Load reads and decodes a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Decode parses untrusted JSON strictly (unknown fields and trailing data are
// refused) and validates it.
func Decode(data []byte) (*Scenario, error) {
	if len(data) > MaxBytes {
		return nil, &ValidationError{[]FieldError{{"", fmt.Sprintf("file is %d bytes, at most %d allowed", len(data), MaxBytes)}}}
	}
	var s Scenario
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, &ValidationError{[]FieldError{jsonError(err)}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &ValidationError{[]FieldError{{"", "unexpected data after the JSON object"}}}
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.Client.MaxAttempts == 0 {
		s.Client.MaxAttempts = 1
	}
	if s.Client.Backoff == 0 {
		s.Client.Backoff = rules.Duration(10 * time.Millisecond)
	}
	return &s, nil
}

func jsonError(err error) FieldError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return FieldError{te.Field, fmt.Sprintf("must be %s, got %s", te.Type, te.Value)}
	case errors.As(err, &se):
		return FieldError{"", fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return FieldError{strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "is not a known field"}
	case errors.Is(err, io.EOF):
		return FieldError{"", "file is empty"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return FieldError{"", "file ends in the middle of the JSON"}
	default:
		return FieldError{"", strings.TrimPrefix(err.Error(), "json: ")}
	}
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`)

// MaxDuration bounds a scenario's duration.
const MaxDuration = 10 * time.Minute

type checker struct{ errs []FieldError }

func (c *checker) add(field, format string, args ...any) {
	c.errs = append(c.errs, FieldError{field, fmt.Sprintf(format, args...)})
}

// Validate checks every field and reports every problem at once.
func (s *Scenario) Validate() error {
	c := &checker{}
	if !nameRE.MatchString(s.Name) {
		c.add("name", "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	d := s.Duration.D()
	if d <= 0 || d > MaxDuration {
		c.add("duration", "must be in (0, %s], got %s", MaxDuration, d)
	}
	c.arrival(&s.Arrival, d)
	c.dist("cost.cpu", &s.Cost.CPU, true)
	if s.Cost.Wait != nil {
		c.dist("cost.wait", s.Cost.Wait, false)
	}
	if s.Downstream != nil && (s.Downstream.Concurrency < 0 || s.Downstream.Concurrency > 100000) {
		c.add("downstream.concurrency", "must be in [0, 100000], got %d", s.Downstream.Concurrency)
	}
	c.client(&s.Client)
	sum := 0.0
	for cl, v := range s.Classes {
		f := "classes." + string(cl)
		if cl.Rank() < 0 {
			c.add(f, "is not a class (critical, core, browse, batch)")
		}
		if !(v >= 0 && v <= 1) {
			c.add(f, "must be a share in [0, 1], got %v", v)
		}
		sum += v
	}
	if len(s.Classes) > 0 && (sum < 0.999 || sum > 1.001) {
		c.add("classes", "shares must sum to 1, got %v", sum)
	}
	if u := s.Users; u != nil {
		if u.Count < 1 || u.Count > 10_000_000 {
			c.add("users.count", "must be in [1, 10000000], got %d", u.Count)
		}
		if u.S != 0 && !(u.S > 1 && u.S <= 10) {
			c.add("users.s", "must be 0 (uniform) or in (1, 10], got %v", u.S)
		}
	}
	if p := s.Pauses; p != nil {
		if p.Every.D() < time.Millisecond {
			c.add("pauses.every", "must be at least 1ms, got %s", p.Every.D())
		}
		if p.Length.D() <= 0 || p.Length.D() >= p.Every.D() {
			c.add("pauses.length", "must be positive and shorter than every, got %s", p.Length.D())
		}
		if !(p.Jitter >= 0 && p.Jitter <= 1) {
			c.add("pauses.jitter", "must be in [0, 1], got %v", p.Jitter)
		}
	}
	for i, e := range s.Events {
		f := fmt.Sprintf("events[%d]", i)
		if e.Kind != EventDownstreamLatency && e.Kind != EventCapacity {
			c.add(f+".kind", "must be %s or %s, got %q", EventDownstreamLatency, EventCapacity, e.Kind)
		}
		if e.Kind == EventDownstreamLatency && s.Cost.Wait == nil {
			c.add(f+".kind", "%s needs cost.wait", EventDownstreamLatency)
		}
		c.window(f, e.From.D(), e.To.D(), d)
		if !(e.Factor > 0 && e.Factor <= 1000) {
			c.add(f+".factor", "must be in (0, 1000], got %v", e.Factor)
		}
	}
	if len(c.errs) > 0 {
		return &ValidationError{c.errs}
	}
	return nil
}

const maxRate = 1e6

func (c *checker) rate(field string, v float64) {
	if !(v >= 0 && v <= maxRate) {
		c.add(field, "must be in [0, %g], got %v", float64(maxRate), v)
	}
}

func (c *checker) window(field string, from, to, d time.Duration) {
	if from < 0 || to <= from || to > d {
		c.add(field, "needs 0 <= from < to <= duration, got from %s to %s", from, to)
	}
}

func (c *checker) arrival(a *Arrival, d time.Duration) {
	if a.Unit != UnitCapacity && a.Unit != UnitRPS {
		c.add("arrival.unit", "must be %s or %s, got %q", UnitCapacity, UnitRPS, a.Unit)
	}
	c.rate("arrival.base", a.Base)
	for i, g := range a.Segments {
		f := fmt.Sprintf("arrival.segments[%d]", i)
		c.window(f, g.From.D(), g.To.D(), d)
		c.rate(f+".rate", g.Rate)
		switch g.Shape {
		case ShapeConstant:
		case ShapeRamp:
			c.rate(f+".rate_end", g.RateEnd)
		case ShapeSine:
			if g.Period.D() <= 0 {
				c.add(f+".period", "must be positive for a sine")
			}
			if !(g.Amplitude >= 0 && g.Amplitude <= maxRate) {
				c.add(f+".amplitude", "must be in [0, %g], got %v", float64(maxRate), g.Amplitude)
			}
		default:
			c.add(f+".shape", "must be constant, ramp or sine, got %q", g.Shape)
		}
	}
}

func (c *checker) dist(field string, d *Dist, positive bool) {
	switch d.Dist {
	case DistConstant, DistExponential:
	case DistUniform:
		if d.Spread < 0 || d.Spread > d.Mean {
			c.add(field+".spread", "must be in [0, mean], got %s", d.Spread.D())
		}
	case DistLognormal:
		if d.Stddev <= 0 {
			c.add(field+".stddev", "must be positive for a lognormal")
		}
		if d.Mean == 0 {
			// Its parameters come from the mean's logarithm.
			c.add(field+".mean", "must be positive for a lognormal")
		}
	default:
		c.add(field+".dist", "must be constant, uniform, exponential or lognormal, got %q", d.Dist)
	}
	if d.Mean < 0 || (positive && d.Mean == 0) || d.Mean.D() > time.Minute {
		c.add(field+".mean", "must be in (0, 1m], got %s", d.Mean.D())
	}
}

func (c *checker) client(cl *Client) {
	if cl.Deadline.D() <= 0 || cl.Deadline.D() > time.Minute {
		c.add("client.deadline", "must be in (0, 1m], got %s", cl.Deadline.D())
	}
	if cl.MaxAttempts < 0 || cl.MaxAttempts > 10 {
		c.add("client.max_attempts", "must be in [0, 10], got %d", cl.MaxAttempts)
	}
	if cl.Backoff < 0 || cl.Backoff.D() > time.Minute {
		c.add("client.backoff", "must be in [0, 1m], got %s", cl.Backoff.D())
	}
	if b := cl.RetryBudget; b != nil {
		if !(b.Ratio >= 0 && b.Ratio <= 10) {
			c.add("client.retry_budget.ratio", "must be in [0, 10], got %v", b.Ratio)
		}
		if !(b.MinPerSecond >= 0 && b.MinPerSecond <= maxRate) {
			c.add("client.retry_budget.min_per_second", "must be in [0, %g], got %v", float64(maxRate), b.MinPerSecond)
		}
	}
}
