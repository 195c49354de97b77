package governor

import (
	"slices"
	"strings"
)

// matcher finds the route of a request: the longest matching path prefix,
// and among equal prefixes a route listing the method before one that lists
// none. Small tables are scanned; larger ones are indexed by prefix length.
type matcher struct {
	entries []matchEntry // longest prefix first, routes with methods first
	lens    []int        // distinct prefix lengths, descending (indexed form)
	byKey   map[string][]matchEntry
}

type matchEntry struct {
	prefix  string
	methods []string
	rt      *route
}

// scanLimit is the table size up to which a linear scan beats map lookups.
const scanLimit = 16

func newMatcher(routes []*route) matcher {
	var m matcher
	for _, rt := range routes {
		m.entries = append(m.entries, matchEntry{prefix: rt.cfg.Match.PathPrefix, methods: rt.cfg.Match.Methods, rt: rt})
	}
	slices.SortStableFunc(m.entries, func(a, b matchEntry) int {
		if len(a.prefix) != len(b.prefix) {
			return len(b.prefix) - len(a.prefix)
		}
		return boolRank(len(a.methods) == 0) - boolRank(len(b.methods) == 0)
	})
	if len(m.entries) > scanLimit {
		m.byKey = map[string][]matchEntry{}
		for _, e := range m.entries {
			if len(m.byKey[e.prefix]) == 0 {
				if n := len(m.lens); n == 0 || m.lens[n-1] != len(e.prefix) {
					m.lens = append(m.lens, len(e.prefix))
				}
			}
			m.byKey[e.prefix] = append(m.byKey[e.prefix], e)
		}
	}
	return m
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (m *matcher) find(path, method string) *route {
	if m.byKey == nil {
		for i := range m.entries {
			e := &m.entries[i]
			if strings.HasPrefix(path, e.prefix) && methodMatches(e.methods, method) {
				return e.rt
			}
		}
		return nil
	}
	for _, l := range m.lens {
		if l > len(path) {
			continue
		}
		for _, e := range m.byKey[path[:l]] {
			if methodMatches(e.methods, method) {
				return e.rt
			}
		}
	}
	return nil
}

func methodMatches(methods []string, method string) bool {
	if len(methods) == 0 {
		return true
	}
	for _, m := range methods {
		if m == method {
			return true
		}
	}
	return false
}
