// Package limiters wraps Governor and the Go libraries people would pick
// instead (aegis BBR, failsafe-go's adaptive limiter, go-zero's adaptive
// shedder, x/time/rate) behind one small interface, plus the "none" and
// "static" baselines. The adapters in this package are the only
// peer-specific code of the overload laboratory: the hot-path benchmark and
// the live server drive every limiter through Limiter.
package limiters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/rules"
)

// ErrRejected is returned by Acquire when a limiter refuses a request.
var ErrRejected = errors.New("limiters: rejected")

// ErrUnknown is returned by New for a limiter name it does not know.
var ErrUnknown = errors.New("limiters: unknown limiter")

// Request is what a limiter may look at to decide.
type Request struct {
	// Class is the request's priority class.
	Class rules.Class
	// User is a stable key of the end user (0 if none).
	User uint64
	// Deadline is the caller's deadline as the request states it
	// (httpgov.HeaderDeadline; zero if none). Every limiter is given it;
	// only "governor" and its algorithm variants use it (Request.Deadline
	// of the SDK), "governor-nodeadline" ignores it, like the peers.
	Deadline time.Time
}

// Ticket is what Acquire hands out and Release takes back: a plain value,
// so passing it around does not allocate. Peers keep their handle (a
// closure, an interface or a pointer, all pointer-shaped) in ref; Governor
// keeps its Permit value.
type Ticket struct {
	ref    any
	permit governor.Permit
}

// Limiter is one admission controller under test.
type Limiter interface {
	// Acquire admits the request or returns an error wrapping ErrRejected
	// (or the context's error when a queueing limiter gave up waiting).
	Acquire(ctx context.Context, r Request) (Ticket, error)
	// Release returns the ticket with the request's latency and whether
	// it failed (deadline missed, error).
	Release(t Ticket, latency time.Duration, failed bool)
	// Close stops background work the limiter started.
	Close()
}

// Options configures the limiters built by New.
type Options struct {
	// CapacityRPS is the server capacity measured by calibration. The
	// "xrate" baseline allows this rate; it is the best a static rate limit
	// could be configured with (oracle knowledge a real operator lacks).
	CapacityRPS float64
	// StaticLimit is the concurrency of the "static" baseline, likewise
	// derived from calibration. Default 16.
	StaticLimit int
	// Ruleset replaces Governor's default ruleset (governor.DefaultRuleset
	// with the adapter's algorithm); nil keeps it.
	Ruleset *rules.Ruleset
}

// Names lists every limiter New knows, sorted.
func Names() []string {
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the named limiter.
func New(name string, o Options) (Limiter, error) {
	f, ok := factories[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	if o.StaticLimit <= 0 {
		o.StaticLimit = 16
	}
	return f(o)
}

// ParseList splits a comma-separated list of limiter names and checks each;
// an empty list means every known limiter.
func ParseList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return Names(), nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := factories[n]; !ok {
			return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnknown, n, strings.Join(Names(), ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

type factory func(Options) (Limiter, error)

// factories maps limiter names to constructors. It is filled by a literal
// (no init side effects) and extended as adapters are added.
var factories = map[string]factory{
	"governor":            newGovernor(rules.AlgorithmGradient, false, true, true),
	"governor-nodeadline": newGovernor(rules.AlgorithmGradient, false, false, true),
	"governor-nosched":    newGovernor(rules.AlgorithmGradient, false, true, false),
	"governor-little":     newGovernor(rules.AlgorithmLittle, false, true, true),
	"governor-queue":      newGovernor(rules.AlgorithmGradient, true, true, true),
	"none":                newNone,
	"static":              newStatic,
	"xrate":               newXRate,
	"aegis-bbr":           newAegisBBR,
	"failsafe-adaptive":   newFailsafe,
	"gozero-shedder":      newGoZero,
}
