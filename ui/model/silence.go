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

// IsSilenceVersion reports whether v may be the version of a silence by
// matchers (alerts/api Silence.Version, an HTTP ETag's value): 1 to 64
// lowercase hexadecimal digits. A form or header holding anything else
// is refused before it reaches the alerts, whose refusal quotes it.
func IsSilenceVersion(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
