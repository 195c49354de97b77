package alerts

import (
	"fmt"
	"strings"
	"time"
)

// Ack is a person's acknowledgement of a firing alert. It holds until the
// alert firing since StartsAt resolves; a later firing is a new alert that
// notifies again.
type Ack struct {
	Fingerprint Fingerprint `json:"fingerprint"`
	// StartsAt ties the acknowledgement to one firing episode.
	StartsAt time.Time `json:"starts_at"`
	By       string    `json:"by"`
	Comment  string    `json:"comment"`
	At       time.Time `json:"at"`
}

// Validate names the first bad field.
func (a Ack) Validate() error {
	switch {
	case strings.TrimSpace(a.By) == "":
		return fmt.Errorf("%w: ack: by must not be empty", ErrInvalid)
	case a.At.IsZero():
		return fmt.Errorf("%w: ack: at must be set", ErrInvalid)
	case a.StartsAt.IsZero():
		return fmt.Errorf("%w: ack: starts_at must be set", ErrInvalid)
	}
	return nil
}

// Covers reports whether the acknowledgement applies to alert a.
func (a Ack) Covers(al Alert) bool {
	return al.Fingerprint() == a.Fingerprint && al.StartsAt.Equal(a.StartsAt) && al.EndsAt.IsZero()
}
