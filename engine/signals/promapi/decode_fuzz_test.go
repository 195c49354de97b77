package promapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"governor.dev/governor/engine/signals"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Any answer decodes to a result or an error, never a panic, and a result
// is consistent: a vector or scalar has samples, a matrix series, each with
// labels and points.
func FuzzDecodeResponse(f *testing.F) {
	for _, b := range []string{vectorBody, matrixBody, scalarBody, badDataBody, timeoutBody, overloadBody,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]},{"metric":{"a":"b"},"value":[1,"-Inf"]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"1","sum":"2","buckets":[[0,"0","1","1"]]}]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"histograms":[[1,{"count":"1","sum":"2"}]]}]}}`,
		`{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`,
		`{"status":"success","data":{"resultType":"vector","result":null}}`,
		`{"status":"success"}`, `{}`, `null`, ``,
	} {
		for _, code := range []int{200, 400, 422, 503} {
			f.Add(code, []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, code int, body []byte) {
		if code < 100 || code > 599 {
			code = 200
		}
		c, err := New(Options{Address: "http://prometheus.invalid:9090", Retries: -1, MaxResponseBytes: 1 << 20,
			RoundTripper: rtFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
			})})
		require.NoError(t, err)
		for _, rng := range []bool{false, true} {
			var res *signals.Result
			if rng {
				res, err = c.QueryRange(context.Background(), "up", signals.Range{Start: at, End: at.Add(time.Minute), Step: time.Second})
			} else {
				res, err = c.Query(context.Background(), "up", at)
			}
			if err != nil {
				require.Nil(t, res)
				continue
			}
			switch res.Type {
			case signals.TypeVector, signals.TypeScalar:
				for _, s := range res.Samples {
					require.NotNil(t, s.Labels)
				}
			case signals.TypeMatrix:
				for _, s := range res.Series {
					require.NotNil(t, s.Labels)
					require.NotEmpty(t, s.Points)
				}
			default:
				t.Fatalf("result type %s without an error", res.Type)
			}
		}
	})
}
