package signals

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// checkGrouping reports why expr may answer other than one sample per
// value of the labels want (the scope's labels, and class for
// ShedRatioByClass), or nil. It follows the labels PromQL gives each
// result: an aggregation's by (...) list, a binary operation's matching, a
// function's argument. A query whose result carries the labels of the
// series it selects (no aggregation, sum without, a one-sided join) or
// labels beyond want (sum by (service, route)) is refused: the reader
// would get several samples for a key and could read none of them.
func checkGrouping(expr parser.Expr, want []string) error {
	if t := expr.Type(); t != parser.ValueTypeVector {
		return fmt.Errorf("the query answers a %s, want an instant vector", t)
	}
	got, err := resultLabels(expr)
	if err != nil {
		return err
	}
	var missing, extra []string
	for _, l := range want {
		if !got[l] {
			missing = append(missing, l)
		}
	}
	for _, l := range slices.Sorted(maps.Keys(got)) {
		if !slices.Contains(want, l) {
			extra = append(extra, l)
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Errorf("the result is grouped by (%s), which lacks %s", strings.Join(slices.Sorted(maps.Keys(got)), ", "), strings.Join(missing, ", "))
	case len(extra) > 0:
		return fmt.Errorf("the result is grouped by %s besides (%s), so it may answer several samples per key", strings.Join(extra, ", "), strings.Join(want, ", "))
	}
	return nil
}

// labelSet is the set of label names a result carries.
type labelSet map[string]bool

func setOf(names ...string) labelSet {
	s := make(labelSet, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

func (s labelSet) String() string { return "(" + strings.Join(slices.Sorted(maps.Keys(s)), ", ") + ")" }

// resultLabels returns the label names every sample of e carries, or an
// error saying why they are those of the series e selects.
func resultLabels(e parser.Expr) (labelSet, error) {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return resultLabels(n.Expr)
	case *parser.StepInvariantExpr:
		return resultLabels(n.Expr)
	case *parser.UnaryExpr:
		return resultLabels(n.Expr)
	case *parser.SubqueryExpr:
		return resultLabels(n.Expr)
	case *parser.VectorSelector, *parser.MatrixSelector:
		return nil, fmt.Errorf("%s answers one sample per series it selects: aggregate it, e.g. sum by ({{.By}}) (...)", e)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return labelSet{}, nil
	case *parser.AggregateExpr:
		return aggregateLabels(n)
	case *parser.BinaryExpr:
		return binaryLabels(n)
	case *parser.Call:
		return callLabels(n)
	}
	return nil, fmt.Errorf("cannot tell the labels of %s", e)
}

func aggregateLabels(n *parser.AggregateExpr) (labelSet, error) {
	switch n.Op {
	case parser.TOPK, parser.BOTTOMK, parser.LIMITK, parser.LIMIT_RATIO:
		// These pick samples of their input, labels and all.
		return resultLabels(n.Expr)
	}
	var out labelSet
	if n.Without {
		in, err := resultLabels(n.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s without (...) keeps the labels of its input: %w", n.Op, err)
		}
		out = maps.Clone(in)
		for _, l := range n.Grouping {
			delete(out, l)
		}
	} else {
		out = setOf(n.Grouping...)
	}
	if n.Op == parser.COUNT_VALUES {
		if s, ok := n.Param.(*parser.StringLiteral); ok {
			out[s.Val] = true
		}
	}
	return out, nil
}

func binaryLabels(n *parser.BinaryExpr) (labelSet, error) {
	lv := n.LHS.Type() == parser.ValueTypeVector
	rv := n.RHS.Type() == parser.ValueTypeVector
	switch {
	case !lv && !rv:
		return labelSet{}, nil
	case !rv:
		return resultLabels(n.LHS)
	case !lv:
		return resultLabels(n.RHS)
	}
	m := n.VectorMatching
	if m == nil {
		m = &parser.VectorMatching{Card: parser.CardOneToOne}
	}
	if n.Op == parser.LOR {
		l, lerr := resultLabels(n.LHS)
		r, rerr := resultLabels(n.RHS)
		switch {
		case lerr != nil:
			return nil, lerr
		case rerr != nil:
			return nil, rerr
		case !maps.Equal(l, r):
			return nil, fmt.Errorf("the sides of or answer different labels, %s and %s", l, r)
		}
		return l, nil
	}
	switch m.Card {
	case parser.CardManyToMany: // and, unless: samples of the left side
		return resultLabels(n.LHS)
	case parser.CardManyToOne, parser.CardOneToMany:
		many := n.LHS
		if m.Card == parser.CardOneToMany {
			many = n.RHS
		}
		out, err := resultLabels(many)
		if err != nil {
			return nil, fmt.Errorf("the many side of a group_left or group_right keeps its labels: %w", err)
		}
		out = maps.Clone(out)
		for _, l := range m.Include {
			out[l] = true
		}
		return out, nil
	}
	// One-to-one: the left side's labels, which equal the right side's
	// on the matching labels; on (...) keeps only those, ignoring (...)
	// drops them.
	l, lerr := resultLabels(n.LHS)
	r, rerr := resultLabels(n.RHS)
	known := l
	if lerr != nil {
		known = r
	}
	if m.On {
		out := setOf(m.MatchingLabels...)
		if lerr == nil || rerr == nil {
			for k := range out {
				if !known[k] {
					delete(out, k)
				}
			}
		}
		return out, nil
	}
	if lerr != nil && rerr != nil {
		return nil, lerr
	}
	out := maps.Clone(known)
	for _, k := range m.MatchingLabels {
		delete(out, k)
	}
	return out, nil
}

func callLabels(n *parser.Call) (labelSet, error) {
	if n.Type() != parser.ValueTypeVector {
		return labelSet{}, nil
	}
	switch n.Func.Name {
	case "vector":
		return labelSet{}, nil
	case "absent", "absent_over_time", "info":
		return nil, fmt.Errorf("%s() answers labels taken from its selector or other series", n.Func.Name)
	}
	var arg parser.Expr
	for _, a := range n.Args {
		if t := a.Type(); t == parser.ValueTypeVector || t == parser.ValueTypeMatrix {
			arg = a
			break
		}
	}
	if arg == nil {
		return nil, fmt.Errorf("cannot tell the labels of %s", n)
	}
	in, err := resultLabels(arg)
	if err != nil {
		return nil, err
	}
	switch n.Func.Name {
	case "histogram_quantile", "histogram_fraction":
		in = maps.Clone(in)
		delete(in, "le")
	case "label_replace", "label_join":
		if len(n.Args) > 1 {
			if s, ok := n.Args[1].(*parser.StringLiteral); ok {
				in = maps.Clone(in)
				in[s.Val] = true
			}
		}
	}
	return in, nil
}
