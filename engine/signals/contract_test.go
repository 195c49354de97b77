package signals

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

// Every metric the default templates read is documented in the SDK's
// metrics contract, so the two cannot drift apart silently.
func TestDefaultTemplatesFollowMetricsContract(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	r, err := NewReader(&fakeSource{}, ReaderOptions{})
	require.NoError(t, err)
	p := parser.NewParser(parser.Options{})
	seen := map[string]bool{}
	for s := range DefaultTemplates() {
		q, err := r.Query(s, PerInstance)
		require.NoError(t, err)
		expr, err := p.ParseExpr(q)
		require.NoError(t, err)
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				seen[vs.Name] = true
			}
			return nil
		})
	}
	require.NotEmpty(t, seen)
	for name := range seen {
		base := strings.TrimSuffix(name, "_bucket")
		require.Contains(t, string(doc), "`"+base+"`", "%s is read by a default template but not in docs/metrics.md", name)
	}
}
