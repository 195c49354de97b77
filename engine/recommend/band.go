package recommend

import (
	"fmt"
	"math"
)

// Band is a service's pre-approved range for automatic changes of the
// service-wide rate ceiling.
type Band struct {
	// Manual services never change automatically.
	Manual bool `json:"manual" yaml:"manual"`
	// MaxChangePerHour is the largest cumulative relative change of the
	// ceiling within an hour that applies itself; default 0.1.
	MaxChangePerHour float64 `json:"max_change_per_hour" yaml:"max_change_per_hour"`
	// Floor and Ceiling bound the service-wide ceiling in requests per
	// second (0: no bound). The controller never recommends outside them.
	Floor   float64 `json:"floor" yaml:"floor"`
	Ceiling float64 `json:"ceiling" yaml:"ceiling"`
}

// DefaultBand returns the default band: 10% per hour, no floor or ceiling.
func DefaultBand() Band { return Band{MaxChangePerHour: 0.1} }

// Validate checks the band; field prefixes the names in errors.
func (b Band) Validate(field string) error {
	switch {
	case !(b.MaxChangePerHour >= 0 && b.MaxChangePerHour <= 10):
		return fmt.Errorf("%w: %s.max_change_per_hour is %v, want in [0, 10]", ErrInvalidOption, field, b.MaxChangePerHour)
	case b.Floor < 0 || math.IsInf(b.Floor, 0) || math.IsNaN(b.Floor):
		return fmt.Errorf("%w: %s.floor is %v, want a finite value >= 0", ErrInvalidOption, field, b.Floor)
	case b.Ceiling < 0 || math.IsInf(b.Ceiling, 0) || math.IsNaN(b.Ceiling):
		return fmt.Errorf("%w: %s.ceiling is %v, want a finite value >= 0", ErrInvalidOption, field, b.Ceiling)
	case b.Ceiling > 0 && b.Floor > b.Ceiling:
		return fmt.Errorf("%w: %s.floor %v is above %s.ceiling %v", ErrInvalidOption, field, b.Floor, field, b.Ceiling)
	}
	return nil
}

// Allows says whether moving the ceiling to `to` applies itself, given the
// ceiling `ref` in force an hour ago (the start of the hour's automatic
// changes), and why.
func (b Band) Allows(ref, to float64) (bool, string) {
	switch {
	case b.Manual:
		return false, "service is marked manual: every change waits for approval"
	case b.Floor > 0 && to < b.Floor:
		return false, fmt.Sprintf("%.1f req/s is below the floor %.1f", to, b.Floor)
	case b.Ceiling > 0 && to > b.Ceiling:
		return false, fmt.Sprintf("%.1f req/s is above the ceiling %.1f", to, b.Ceiling)
	case !(ref > 0):
		return false, "no reference ceiling to measure the change against"
	}
	change := math.Abs(to/ref - 1)
	if change > b.MaxChangePerHour+1e-9 {
		return false, fmt.Sprintf("a change of %.1f%% within the hour exceeds the band of %.1f%%", 100*change, 100*b.MaxChangePerHour)
	}
	return true, fmt.Sprintf("a change of %.1f%% within the hour is inside the band of %.1f%%", 100*change, 100*b.MaxChangePerHour)
}

// bounds returns the controller's output limits for a band and a starting
// ceiling: the band's floor and ceiling, or a tenth and ten times c0.
func (b Band) bounds(c0 float64) (lo, hi float64) {
	lo, hi = c0/10, c0*10
	if b.Floor > 0 {
		lo = b.Floor
	}
	if b.Ceiling > 0 {
		hi = b.Ceiling
	}
	return lo, max(hi, lo)
}
