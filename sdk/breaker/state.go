package breaker

// State is a breaker state. Its numeric value is what the
// governor_sdk_breaker_state gauge reports.
type State int32

// Breaker states.
const (
	Closed   State = 0
	HalfOpen State = 1
	Open     State = 2
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "unknown"
}

// Ticket ties a call to what admitted it: the Breaker's generation, or the
// time the Throttle counted its request. The zero Ticket is never issued by
// Allow and is ignored by Record and Release.
type Ticket uint64
