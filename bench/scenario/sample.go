package scenario

import (
	"math"
	"math/rand/v2"
	"time"
)

// Sample draws a duration from d.
func (d Dist) Sample(rng *rand.Rand) time.Duration {
	m := float64(d.Mean)
	var v float64
	switch d.Dist {
	case DistUniform:
		v = m + (rng.Float64()*2-1)*float64(d.Spread)
	case DistExponential:
		v = rng.ExpFloat64() * m
	case DistLognormal:
		sd := float64(d.Stddev)
		sigma2 := math.Log(1 + sd*sd/(m*m))
		mu := math.Log(m) - sigma2/2
		v = math.Exp(mu + math.Sqrt(sigma2)*rng.NormFloat64())
	default:
		v = m
	}
	return time.Duration(max(v, 0))
}

// Source draws the random parts of traffic from one seeded generator, so a
// scenario produces the same requests every time.
type Source struct {
	s      *Scenario
	rng    *rand.Rand
	zipf   *rand.Zipf
	shares [4]float64
}

// NewSource returns a generator seeded with the scenario's seed plus salt.
func NewSource(s *Scenario, salt uint64) *Source {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), salt))
	src := &Source{s: s, rng: rng, shares: s.ClassShares()}
	if u := s.Users; u != nil && u.S > 1 && u.Count > 1 {
		src.zipf = rand.NewZipf(rng, u.S, 1, uint64(u.Count-1))
	}
	return src
}

// Rand exposes the generator for other draws.
func (src *Source) Rand() *rand.Rand { return src.rng }

// Class draws a class rank (0 critical .. 3 batch) from the mix.
func (src *Source) Class() int {
	x := src.rng.Float64()
	for i, p := range src.shares {
		if x < p {
			return i
		}
		x -= p
	}
	return 1
}

// User draws a user key (0 when the scenario has no users).
func (src *Source) User() uint64 {
	u := src.s.Users
	switch {
	case u == nil:
		return 0
	case src.zipf != nil:
		return src.zipf.Uint64() + 1
	default:
		return src.rng.Uint64N(uint64(u.Count)) + 1
	}
}

// Arrivals returns the first-attempt arrival times of the whole run: a
// non-homogeneous Poisson process with rate RateAt, drawn by thinning.
func (src *Source) Arrivals(capacityRPS float64) []time.Duration {
	s := src.s
	peak := s.MaxRate(capacityRPS)
	if peak <= 0 {
		return nil
	}
	var out []time.Duration
	t := 0.0
	end := s.Length().Seconds()
	for {
		t += src.rng.ExpFloat64() / peak
		if t >= end {
			return out
		}
		at := time.Duration(t * float64(time.Second))
		if src.rng.Float64()*peak < s.RateAt(at, capacityRPS) {
			out = append(out, at)
		}
	}
}

// PauseSchedule returns the start times of the server pauses.
func (src *Source) PauseSchedule() []time.Duration {
	p := src.s.Pauses
	if p == nil {
		return nil
	}
	var out []time.Duration
	t := time.Duration(0)
	for {
		step := float64(p.Every) * (1 + p.Jitter*(src.rng.Float64()*2-1))
		t += time.Duration(step)
		if t >= src.s.Length() {
			return out
		}
		out = append(out, t)
	}
}
