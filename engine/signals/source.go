package signals

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Errors returned by sources and readers. Implementations wrap them with %w.
var (
	// ErrQuery marks a query the backend refused: bad PromQL, execution error.
	ErrQuery = errors.New("signals: query failed")
	// ErrUnavailable marks a backend that could not be reached or answered
	// with a server error after every retry.
	ErrUnavailable = errors.New("signals: source unavailable")
	// ErrInvalidOption marks a bad option or template.
	ErrInvalidOption = errors.New("signals: invalid option")
)

// Source evaluates PromQL. Implementations are safe for concurrent use.
type Source interface {
	// Query evaluates an instant query at time at.
	Query(ctx context.Context, query string, at time.Time) (*Result, error)
	// QueryRange evaluates a range query over r.
	QueryRange(ctx context.Context, query string, r Range) (*Result, error)
}

// Range is the time span and resolution of a range query.
type Range struct {
	Start, End time.Time
	Step       time.Duration
}

// Validate refuses an empty or inverted range or a non-positive step.
func (r Range) Validate() error {
	switch {
	case r.Step <= 0:
		return fmt.Errorf("%w: range step must be positive, got %s", ErrInvalidOption, r.Step)
	case r.End.Before(r.Start):
		return fmt.Errorf("%w: range end %s is before start %s", ErrInvalidOption, r.End, r.Start)
	}
	return nil
}

// ValueType is the type of a query result.
type ValueType int

// Result types, as in PromQL.
const (
	TypeNone ValueType = iota
	TypeScalar
	TypeVector
	TypeMatrix
	TypeString
)

func (t ValueType) String() string {
	switch t {
	case TypeScalar:
		return "scalar"
	case TypeVector:
		return "vector"
	case TypeMatrix:
		return "matrix"
	case TypeString:
		return "string"
	}
	return "none"
}

// Labels is a set of label names and values.
type Labels map[string]string

// String renders the labels in PromQL selector syntax with sorted names.
func (l Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	b.WriteByte('}')
	return b.String()
}

// Point is one value at one time.
type Point struct {
	T time.Time
	V float64
}

// Sample is one labelled point of an instant vector (or the scalar, with no
// labels).
type Sample struct {
	Labels Labels
	Point
}

// Series is one labelled series of a range result.
type Series struct {
	Labels Labels
	Points []Point
}

// Result is the typed answer of a query. Warnings carry what the backend
// reported as non-fatal: partial data from a federated store, dropped native
// histogram samples, PromQL annotations. A result with warnings is usable but
// may be incomplete; callers surface them.
type Result struct {
	Type ValueType
	// Samples holds the instant vector, or the scalar as one unlabelled
	// sample.
	Samples []Sample
	// Series holds the range matrix.
	Series []Series
	// String holds a string result.
	String   string
	Warnings []string
}
