package thresholds

import "math"

// Rarity histogram layout: natural-log bins of width rarityStep from
// rarityMin; values below fall in the first bin, above in the last.
const (
	rarityBins = 80
	rarityMin  = -8.0 // ln of the smallest resolved value (about 3e-4)
	rarityStep = 0.5
)

// rarity measures how rare a non-negative feature value is against the
// series' own history: the surprisal -ln P(F >= f), with P estimated from an
// exponentially decayed, log-binned histogram of past values. Recurring
// events (daily spikes, say) become unsurprising; a value beyond anything
// seen scores highest, growing with how far beyond it lies.
//
// The histogram is a Fenwick tree, so both the tail query and the update
// cost O(log bins).
type rarity struct {
	tree   [rarityBins + 1]float64 // Fenwick tree over bin counts, 1-based
	total  float64
	weight float64 // weight of the next sample; grows instead of decaying the counts
	growth float64
	max    float64 // largest value seen (undecayed)
	lo     float64 // ln of the lower edge of the first bin
}

func newRarity(halfLife float64) rarity {
	return rarity{weight: 1, growth: math.Exp2(1 / halfLife), lo: rarityMin}
}

// bin is the histogram bin of f.
func (r *rarity) bin(f float64) int {
	if !(f > 0) {
		return 0
	}
	b := int((math.Log(f) - r.lo) / rarityStep)
	return max(0, min(b, rarityBins-1))
}

// below is the decayed count of bins [0, b).
func (r *rarity) below(b int) float64 {
	s := 0.0
	for i := b; i > 0; i -= i & -i {
		s += r.tree[i]
	}
	return s
}

// surprisal is -ln of the decayed share of past values in f's bin or above,
// with one pseudo-count of prior so an unseen level is finite. A value
// beyond the largest ever seen adds ln(f / largest).
func (r *rarity) surprisal(f float64, bin int) float64 {
	tail := math.Max(r.total-r.below(bin), 0)
	s := math.Log((r.total + r.weight) / (tail + r.weight))
	if f > r.max && r.max > 0 {
		s += math.Log(f) - math.Log(r.max)
	}
	return s
}

// update adds f (in bin) with the current weight.
func (r *rarity) update(f float64, bin int) {
	for i := bin + 1; i <= rarityBins; i += i & -i {
		r.tree[i] += r.weight
	}
	r.total += r.weight
	r.weight *= r.growth
	r.max = math.Max(r.max, f)
	if r.weight > 1e150 {
		for i := range r.tree {
			r.tree[i] /= r.weight
		}
		r.total /= r.weight
		r.weight = 1
	}
}
