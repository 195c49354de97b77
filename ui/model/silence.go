package model

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalid: bad input to a model helper.
var ErrInvalid = errors.New("model: invalid input")

func invalid(msg string) error { return fmt.Errorf("%w: %s", ErrInvalid, msg) }

// MaxSilenceComment is the longest comment of a silence, in bytes.
const MaxSilenceComment = 1000

// ParseSilence checks a silence request: a service, an optional tier, a
// duration between 1 minute and 7 days and a comment.
func ParseSilence(service, tier, dur, comment string, now time.Time) (Silence, error) {
	if service == "" {
		return Silence{}, invalid("service: required")
	}
	t := Tier(tier)
	if tier != "" && t != P0 && t != P1 && t != P2 {
		return Silence{}, invalid("tier: must be P0, P1, P2 or empty")
	}
	d, err := time.ParseDuration(dur)
	if err != nil || d < time.Minute || d > 7*24*time.Hour {
		return Silence{}, invalid("for: must be a duration between 1m and 168h")
	}
	comment = strings.TrimSpace(comment)
	if comment == "" || len(comment) > MaxSilenceComment {
		return Silence{}, invalid(fmt.Sprintf("comment: required, at most %d bytes", MaxSilenceComment))
	}
	return Silence{Service: service, Tier: t, Until: now.Add(d), Comment: comment}, nil
}
