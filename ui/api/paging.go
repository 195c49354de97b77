package api

import (
	"fmt"
	"net/url"
	"strconv"

	"governor.dev/governor/sdk/rules"
)

// maxLimit is the most items one page holds: the stores answer one query
// with at most this many rows.
const maxLimit = 1000

// pageLimit reads ?limit, def when absent; a value outside 1..maxLimit is
// a problem naming it (it is not cut to the maximum: a page shorter than
// asked for would read as the last).
func pageLimit(q url.Values, def int, bad *[]rules.FieldError) int {
	s := q.Get("limit")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		*bad = append(*bad, rules.FieldError{Field: "limit", Problem: fmt.Sprintf("must be an integer between 1 and %d, got %q", maxLimit, s)})
		return def
	}
	return n
}

// cursor reads the positive integer ?name, 0 when absent.
func cursor(q url.Values, name string, bad *[]rules.FieldError) int64 {
	s := q.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		*bad = append(*bad, rules.FieldError{Field: name, Problem: fmt.Sprintf("must be a positive integer, got %q", s)})
		return 0
	}
	return n
}

// fetchPage reads up to limit items and whether more follow, with one
// query: fetch is asked for limit+1, the extra item only telling that
// more follow. A page of maxLimit, for which a store returns no extra
// row, asks beyond(last) instead: a one-row query past the page, or nil
// when none can be made (more is then false).
func fetchPage[T any](limit int, fetch func(n int) ([]T, error), beyond func(last T) (bool, error)) ([]T, bool, error) {
	items, err := fetch(min(limit+1, maxLimit))
	if err != nil {
		return nil, false, err
	}
	if len(items) > limit {
		return items[:limit], true, nil
	}
	if limit == maxLimit && len(items) == limit && beyond != nil {
		more, err := beyond(items[len(items)-1])
		return items, more, err
	}
	return items, false, nil
}

// paged is a list's answer: the items under key, more, and, when more
// follow, the value to pass as the cursor parameter for them under
// "next_"+cursor (next_before, next_after).
func paged(key string, items any, more bool, cursorName string, next int64) map[string]any {
	out := map[string]any{key: items, "more": more}
	if more && cursorName != "" {
		out["next_"+cursorName] = next
	}
	return out
}
