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
type rarity struct {
	counts [rarityBins]float64
	total  float64
	weight float64 // weight of the next sample; grows instead of decaying the counts
	growth float64
	max    float64 // largest value seen (undecayed)
}

func newRarity(halfLife float64) rarity {
	return rarity{weight: 1, growth: math.Exp2(1 / halfLife)}
}

func rarityBin(f float64) int {
	if !(f > 0) {
		return 0
	}
	b := int((math.Log(f) - rarityMin) / rarityStep)
	return max(0, min(b, rarityBins-1))
}

// surprisal is -ln of the decayed share of past values at or above f, with
// one pseudo-count of prior so an unseen level is finite.
func (r *rarity) surprisal(f float64) float64 {
	b := rarityBin(f)
	tail := 0.0
	for i := b; i < rarityBins; i++ {
		tail += r.counts[i]
	}
	s := math.Log((r.total + r.weight) / (tail + r.weight))
	if f > r.max && r.max > 0 {
		s += math.Log(f / r.max)
	}
	return s
}

func (r *rarity) update(f float64) {
	r.counts[rarityBin(f)] += r.weight
	r.total += r.weight
	r.weight *= r.growth
	r.max = math.Max(r.max, f)
	if r.weight > 1e150 {
		for i := range r.counts {
			r.counts[i] /= r.weight
		}
		r.total /= r.weight
		r.weight = 1
	}
}
