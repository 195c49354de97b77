package rule

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// The built-in rules read SDK series by the names of docs/metrics.md; a
// renamed series breaks this test rather than silencing an alert.
func TestBuiltinRulesUseDocumentedMetrics(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, r := range Builtin() {
		if r.Expr == "" {
			continue
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
		if err != nil {
			t.Fatal(err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok || !strings.HasPrefix(vs.Name, "governor_sdk_") {
				return nil
			}
			checked++
			if !strings.Contains(string(doc), "`"+vs.Name+"`") {
				t.Errorf("rule %s reads %s, which docs/metrics.md does not list", r.Name, vs.Name)
			}
			return nil
		})
	}
	if checked < 3 {
		t.Fatalf("only %d SDK series checked", checked)
	}
}
