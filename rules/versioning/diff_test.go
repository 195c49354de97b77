package versioning_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

func base() *rules.Ruleset {
	return &rules.Ruleset{
		Service: "checkout",
		Routes: []rules.Route{
			{Name: "pay", Match: rules.Match{PathPrefix: "/pay", Methods: []string{"POST"}}, RateLimit: &rules.RateLimit{Rate: 10}},
			{Name: "browse", Match: rules.Match{PathPrefix: "/"}, Shedding: &rules.Shedding{Reserved: 0.1}},
		},
		Downstreams: []rules.Downstream{{Name: "db", Timeout: rules.Duration(2e9)}},
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *rules.Ruleset) *rules.Ruleset
		want []versioning.Change
	}{
		{"identical", func(r *rules.Ruleset) *rules.Ruleset { return r }, nil},
		{"reordered routes are not a change", func(r *rules.Ruleset) *rules.Ruleset {
			r.Routes[0], r.Routes[1] = r.Routes[1], r.Routes[0]
			return r
		}, nil},
		{"changed leaf", func(r *rules.Ruleset) *rules.Ruleset {
			r.Routes[0].RateLimit.Rate = 12.5
			return r
		}, []versioning.Change{{Path: "routes[pay].rate_limit.rate", Op: versioning.OpChanged, Old: raw(`10`), New: raw(`12.5`)}}},
		{"added field", func(r *rules.Ruleset) *rules.Ruleset {
			r.Routes[0].RateLimit.Burst = 20
			return r
		}, []versioning.Change{{Path: "routes[pay].rate_limit.burst", Op: versioning.OpAdded, New: raw(`20`)}}},
		{"removed object", func(r *rules.Ruleset) *rules.Ruleset {
			r.Routes[1].Shedding = nil
			return r
		}, []versioning.Change{{Path: "routes[browse].shedding", Op: versioning.OpRemoved, Old: raw(`{"reserved":0.1}`)}}},
		{"added and removed named entries", func(r *rules.Ruleset) *rules.Ruleset {
			r.Routes = r.Routes[:1]
			r.Downstreams = append(r.Downstreams, rules.Downstream{Name: "cache"})
			return r
		}, []versioning.Change{
			{Path: "downstreams[cache]", Op: versioning.OpAdded, New: raw(`{"name":"cache"}`)},
			{Path: "routes[browse]", Op: versioning.OpRemoved, Old: raw(`{"match":{"path_prefix":"/"},"name":"browse","shedding":{"reserved":0.1}}`)},
		}},
		{"list of values compares whole", func(r *rules.Ruleset) *rules.Ruleset {
			r.Routes[0].Match.Methods = []string{"PUT", "POST"}
			return r
		}, []versioning.Change{{Path: "routes[pay].match.methods", Op: versioning.OpChanged, Old: raw(`["POST"]`), New: raw(`["POST","PUT"]`)}}},
		{"duration", func(r *rules.Ruleset) *rules.Ruleset {
			r.Downstreams[0].Timeout = rules.Duration(15e8)
			return r
		}, []versioning.Change{{Path: "downstreams[db].timeout", Op: versioning.OpChanged, Old: raw(`"2s"`), New: raw(`"1.5s"`)}}},
		{"map entry", func(r *rules.Ruleset) *rules.Ruleset {
			r.Priority = &rules.Priority{Levels: map[string]rules.Class{"3": rules.ClassBatch}}
			return r
		}, []versioning.Change{{Path: "priority", Op: versioning.OpAdded, New: raw(`{"levels":{"3":"batch"}}`)}}},
		{"all routes removed", func(r *rules.Ruleset) *rules.Ruleset {
			r.Routes = nil
			return r
		}, []versioning.Change{{Path: "routes", Op: versioning.OpRemoved,
			Old: raw(`[{"match":{"path_prefix":"/"},"name":"browse","shedding":{"reserved":0.1}},{"match":{"methods":["POST"],"path_prefix":"/pay"},"name":"pay","rate_limit":{"rate":10}}]`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := base()
			b := tt.edit(base())
			require.Equal(t, tt.want, versioning.Diff(a, b))
			// The reverse diff swaps added and removed, old and new.
			rev := versioning.Diff(b, a)
			require.Len(t, rev, len(tt.want))
			for i, c := range rev {
				require.Equal(t, tt.want[i].Path, c.Path)
				require.Equal(t, tt.want[i].Old, c.New)
				require.Equal(t, tt.want[i].New, c.Old)
			}
		})
	}
}

func TestDiffNil(t *testing.T) {
	got := versioning.Diff(nil, &rules.Ruleset{Service: "x"})
	require.Equal(t, []versioning.Change{{Path: "service", Op: versioning.OpAdded, New: raw(`"x"`)}}, got)
	require.Empty(t, versioning.Diff(nil, nil))
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }
