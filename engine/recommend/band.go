package recommend

import (
	"context"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/rules/versioning"
)

// Band is a service's pre-approved range for automatic changes of the
// service-wide rate ceiling.
type Band struct {
	// Manual services never change automatically.
	Manual bool `json:"manual" yaml:"manual"`
	// MaxChangePerHour is the largest cumulative relative change of the
	// ceiling within an hour that applies itself; default 0.1. A move
	// against an automatic change of the hour counts every move of the
	// hour (Proposer.Submit), so the ceiling does not flap inside it.
	MaxChangePerHour float64 `json:"max_change_per_hour" yaml:"max_change_per_hour"`
	// Floor and Ceiling bound the service-wide ceiling in requests per
	// second (0: no bound). The controller never recommends outside them.
	Floor   float64 `json:"floor" yaml:"floor"`
	Ceiling float64 `json:"ceiling" yaml:"ceiling"`
}

// DefaultBand returns the default band: 10% per hour, no floor or ceiling.
func DefaultBand() Band { return Band{MaxChangePerHour: 0.1} }

// BandWindow is how far back Band.MaxChangePerHour counts the changes that
// applied themselves: the reference ceiling is the one the oldest of them
// within BandWindow replaced (boundary included).
const BandWindow = time.Hour

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
	case !(to > 0) || math.IsInf(to, 0):
		return false, fmt.Sprintf("%v req/s is not a positive finite ceiling", to)
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
// ceiling: the band's floor and ceiling, or a tenth and ten times c0 (or
// the floor, or a tenth of the band's ceiling, when the band lies that far
// from c0). A band whose floor is its ceiling (a pinned ceiling) gives
// limits one representable step apart, as the controller needs OutMin <
// OutMax; clamp then pins its output.
func (b Band) bounds(c0 float64) (lo, hi float64) {
	lo, hi = c0/10, c0*10
	switch {
	case b.Floor > 0 && b.Ceiling > 0:
		lo, hi = b.Floor, b.Ceiling
	case b.Floor > 0:
		lo, hi = b.Floor, max(hi, 10*b.Floor)
	case b.Ceiling > 0:
		lo, hi = min(lo, b.Ceiling/10), b.Ceiling
	}
	if !(hi > lo) {
		hi = math.Nextafter(lo, math.Inf(1))
	}
	return lo, hi
}

// clamp keeps a ceiling within the band's floor and ceiling.
func (b Band) clamp(x float64) float64 {
	if b.Ceiling > 0 {
		x = min(x, b.Ceiling)
	}
	if b.Floor > 0 {
		x = max(x, b.Floor)
	}
	return x
}

// Where a service's band comes from (Submitted.BandSource).
const (
	// BandFromPolicy: a person set the band in the service's policy in the
	// rules store (versioning.Policy.Band).
	BandFromPolicy = "policy"
	// BandFromConfig: the engine's configured band (the fallback).
	BandFromConfig = "config"
)

// PolicyBand returns the band in force for a service under pol, and where it
// comes from. A band a person set in the policy (pol.Band) takes precedence
// over fallback, the engine's configured band, and is manual exactly when
// the policy is ManualOnly. Without one, fallback applies, and it is manual
// when fallback is or the policy is ManualOnly (the store refuses automatic
// application under a ManualOnly policy in any case).
func PolicyBand(pol versioning.Policy, fallback Band) (Band, string) {
	if b := pol.Band; b != nil {
		return Band{Manual: pol.ManualOnly, MaxChangePerHour: b.MaxChangePerHour, Floor: b.Floor, Ceiling: b.Ceiling}, BandFromPolicy
	}
	fallback.Manual = fallback.Manual || pol.ManualOnly
	return fallback, BandFromConfig
}

// PolicyBands gives each service the band in force (see PolicyBand) from the
// rules store's policy, falling back to the engine's configured band. Its
// Band method fits engine/evaluate's Options.Band, so the controller's
// output bounds and Proposer's auto-apply decision use the same band.
type PolicyBands struct {
	// Reader is the rules store; required.
	Reader versioning.Reader
	// Fallback returns a service's configured band; nil means DefaultBand.
	Fallback func(service string) Band
	// Timeout bounds each policy read; default 2s.
	Timeout time.Duration
}

// Band returns service's band: the policy's when a person set one, else the
// fallback. It costs one primary-key read of the store. If the store cannot
// be read it returns the fallback made manual, so that nothing applies
// itself under a band nobody could check; Proposer.Submit reads the policy
// again (and fails) before proposing.
func (p *PolicyBands) Band(service string) Band {
	fallback := DefaultBand()
	if p.Fallback != nil {
		fallback = p.Fallback(service)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pol, err := p.Reader.Policy(ctx, service)
	if err != nil {
		fallback.Manual = true
		return fallback
	}
	b, _ := PolicyBand(pol, fallback)
	return b
}
