// Package shed decides which requests give way first under overload.
//
// A Classifier maps a request's priority value (the X-Traffic-Priority header:
// a digit 0-9 or a class name such as "critical") to one of the four traffic
// classes. Thresholds turns a concurrency limit into one in-flight ceiling per
// class: the critical class may use the whole limit, every lower class a
// strictly smaller (or, at tiny limits, equal) share, so under the same load a
// lower class is always shed before a higher one and priority inversion cannot
// happen. At the small limits of a saturated server a share of the limit is
// less than the few slots critical traffic holds, so Plan adds room for the
// critical class's measured concurrency (Reserve) on top of the limit,
// letting it go beyond the limit by what it needs (bounded by Overshoot)
// while the lower classes, unchanged, absorb the shedding. The room is kept
// only while the lower classes are admitted beside critical: once they are
// all shed, critical's in-flight count measures its own queue, and its
// ceiling is the limit (Reserve.Room). With consistent user
// shedding a class's ceiling is spread over user cohorts, so the same users
// give way first for a rotation period and their sessions are either served
// or shed, not half of each.
package shed

import (
	"strings"

	"governor.dev/governor/sdk/rules"
)

// NumClasses is the number of traffic classes; class ranks run from 0
// (critical) to NumClasses-1 (batch).
const NumClasses = len(rules.Classes)

// defaultLevels maps the digits 0-9 to class ranks: 0-1 critical, 2-4 core,
// 5-7 browse, 8-9 batch.
var defaultLevels = [10]uint8{0, 0, 1, 1, 1, 2, 2, 2, 3, 3}

// Classifier maps priority values to class ranks. It is immutable and safe for
// concurrent use; Classify allocates nothing.
type Classifier struct {
	levels  [10]uint8
	names   [NumClasses]uint8 // the rank of each class name: its own unless an alias redefines it
	aliases map[string]uint8
	def     uint8
	// trusted is set when the rules cap classes by peer (rules.Trust):
	// maxRank caps an unlisted peer, peers each listed one.
	trusted bool
	maxRank uint8
	peers   map[string]uint8
}

// NewClassifier builds a classifier from a validated priority configuration;
// nil means the defaults. Unknown classes in p (which Validate refuses) fall
// back to the default class. An alias whose key is a class name (in any
// letter case, surrounding spaces ignored) redefines that name in every
// spelling (the lowest of their classes when several spellings of one name
// are aliased), so aliases {"critical": "core"} with levels 0 and 1 mapped
// to core leave clients no header value that claims the critical class.
func NewClassifier(p *rules.Priority) *Classifier {
	c := &Classifier{levels: defaultLevels, def: uint8(rules.ClassCore.Rank())}
	for i := range c.names {
		c.names[i] = uint8(i)
	}
	if p == nil {
		return c
	}
	if r := p.Default.Rank(); r >= 0 {
		c.def = uint8(r)
	}
	for k, v := range p.Levels {
		if len(k) == 1 && k[0] >= '0' && k[0] <= '9' && v.Rank() >= 0 {
			c.levels[k[0]-'0'] = uint8(v.Rank())
		}
	}
	if t := p.Trust; t != nil && t.Max.Rank() >= 0 {
		c.trusted = true
		c.maxRank = uint8(t.Max.Rank())
		c.peers = make(map[string]uint8, len(t.Peers))
		for k, v := range t.Peers {
			if r := v.Rank(); r >= 0 {
				c.peers[k] = uint8(r)
			}
		}
	}
	if len(p.Aliases) > 0 {
		c.aliases = make(map[string]uint8, len(p.Aliases))
		var renamed [NumClasses]bool
		for k, v := range p.Aliases {
			r := v.Rank()
			if r < 0 {
				continue
			}
			c.aliases[k] = uint8(r)
			if i := className(k); i >= 0 {
				// Two spellings of one name may be aliased to different
				// classes: the other spellings get the lower one, the
				// same on every instance whatever the map's order.
				if !renamed[i] || uint8(r) > c.names[i] {
					c.names[i] = uint8(r)
				}
				renamed[i] = true
			}
		}
	}
	return c
}

// Default returns the rank of requests without a valid priority.
func (c *Classifier) Default() int { return int(c.def) }

// Classify returns the class rank (0 critical .. 3 batch) of a priority value.
// Empty or unrecognised values get the default class.
func (c *Classifier) Classify(v string) int {
	if r, ok := c.Lookup(v); ok {
		return r
	}
	return int(c.def)
}

// ClassifyFrom is Classify capped by the rules' trust (rules.Trust) for the
// request's transport-authenticated peer: a request claiming, or defaulting
// to, a class above its peer's cap gets the cap, and capped reports it.
// Without trust rules it is Classify. It allocates nothing.
func (c *Classifier) ClassifyFrom(v, peer string) (rank int, capped bool) {
	rank = c.Classify(v)
	if !c.trusted {
		return rank, false
	}
	limit := c.maxRank
	if peer != "" {
		if r, ok := c.peers[peer]; ok {
			limit = r
		}
	}
	if rank < int(limit) {
		return int(limit), true
	}
	return rank, false
}

// Trusts reports whether classes depend on the peer (rules.Priority.Trust
// is set), so a transport need only work out Request.Peer then.
func (c *Classifier) Trusts() bool { return c.trusted }

// Lookup returns the class rank of a priority value and whether the value was
// recognised: a digit 0-9 (surrounding spaces allowed), a class name in any
// letter case (surrounding spaces allowed; the class of an alias with that
// name when one is configured), or a configured alias (exact match).
func (c *Classifier) Lookup(v string) (int, bool) {
	if d, ok := ParseLevel(v); ok {
		return int(c.levels[d]), true
	}
	if c.aliases != nil {
		if r, ok := c.aliases[v]; ok {
			return int(r), true
		}
	}
	if i := className(v); i >= 0 {
		return int(c.names[i]), true
	}
	return 0, false
}

// className returns the rank of the class v names in any letter case,
// surrounding spaces ignored, or -1.
func className(v string) int {
	v = strings.TrimSpace(v)
	for i, name := range rules.Classes {
		if strings.EqualFold(v, string(name)) {
			return i
		}
	}
	return -1
}

// ParseLevel parses a numeric priority: a single digit 0-9, optionally
// surrounded by spaces or tabs. It reports false for anything else.
func ParseLevel(v string) (int, bool) {
	if len(v) == 1 {
		if d := v[0]; d >= '0' && d <= '9' {
			return int(d - '0'), true
		}
		return 0, false
	}
	i, j := 0, len(v)
	for i < j && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	for j > i && (v[j-1] == ' ' || v[j-1] == '\t') {
		j--
	}
	if j-i == 1 && v[i] >= '0' && v[i] <= '9' {
		return int(v[i] - '0'), true
	}
	return 0, false
}
