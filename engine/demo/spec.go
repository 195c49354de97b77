package demo

import (
	"fmt"
	"math"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Incident is the kind of trouble a service runs into once per period.
type Incident int

// The incidents of the demo traffic.
const (
	// Spike multiplies the offered rate.
	Spike Incident = iota
	// SlowDownstream multiplies the service time of every request.
	SlowDownstream
	// CapacityDrop divides the backend's capacity (instances lose workers).
	CapacityDrop
)

func (i Incident) String() string {
	switch i {
	case Spike:
		return "spike"
	case SlowDownstream:
		return "slow_downstream"
	case CapacityDrop:
		return "capacity_drop"
	}
	return fmt.Sprintf("incident(%d)", int(i))
}

// Service describes one demo service.
type Service struct {
	Name string
	// Capacity is how many requests one instance serves at full speed at once.
	Capacity int
	// Work is the service time of one request at or below capacity.
	Work time.Duration
	// Rate is the offered load of the whole service in requests per second.
	Rate float64
	// Incident is what happens once per period; Offset shifts it in the
	// period so the services do not all suffer at once.
	Incident Incident
	Offset   time.Duration
	// Factor is the incident's strength: the spike's rate multiplier, the
	// slow-down of the downstream, or the divisor of the capacity.
	Factor float64
}

// DefaultServices returns the three demo services. With two instances each
// runs at about 60% of its capacity outside incidents and well beyond it
// during one.
func DefaultServices() []Service {
	return []Service{
		{Name: "checkout", Capacity: 8, Work: 20 * time.Millisecond, Rate: 500, Incident: Spike, Offset: 60 * time.Second, Factor: 2.5},
		{Name: "catalog", Capacity: 8, Work: 15 * time.Millisecond, Rate: 700, Incident: SlowDownstream, Offset: 20 * time.Second, Factor: 3},
		{Name: "search", Capacity: 6, Work: 25 * time.Millisecond, Rate: 350, Incident: CapacityDrop, Offset: 40 * time.Second, Factor: 2},
	}
}

// Validate checks a service description, naming the field.
func (s Service) Validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("%w: service name is empty", ErrInvalidOption)
	case s.Capacity < 1:
		return fmt.Errorf("%w: service %s: capacity must be at least 1, got %d", ErrInvalidOption, s.Name, s.Capacity)
	case s.Work <= 0:
		return fmt.Errorf("%w: service %s: work must be above 0, got %s", ErrInvalidOption, s.Name, s.Work)
	case !(s.Rate >= 0) || math.IsInf(s.Rate, 1):
		return fmt.Errorf("%w: service %s: rate must be a finite number not below 0, got %v", ErrInvalidOption, s.Name, s.Rate)
	case !(s.Factor >= 1) || math.IsInf(s.Factor, 1):
		return fmt.Errorf("%w: service %s: factor must be a finite number of at least 1, got %v", ErrInvalidOption, s.Name, s.Factor)
	}
	return nil
}

// Ruleset is the service's starting rules: one route /api/ with a per-instance
// rate limit above the normal load, an adaptive concurrency limit around the
// capacity and priority shedding. Every valid service gets a valid ruleset:
// the rate limit is at least 1 req/s and the concurrency floor at most the
// capacity.
func (s Service) Ruleset(instances int) *rules.Ruleset {
	perInstance := max(math.Floor(s.Rate*1.5/float64(max(instances, 1))), 1)
	return &rules.Ruleset{
		Service: s.Name,
		Routes: []rules.Route{{
			Name:        "api",
			Match:       rules.Match{PathPrefix: "/api/"},
			RateLimit:   &rules.RateLimit{Rate: perInstance},
			Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Initial: s.Capacity, Min: min(2, s.Capacity), Max: s.Capacity * 4},
			Shedding:    &rules.Shedding{Reserved: 0.1},
		}},
	}
}

// phase returns the incident multipliers at elapsed time t of a period:
// (rate, work, capacity divisor), all 1 outside the incident. The incident
// lasts a third of the period.
func (s Service) phase(t, period time.Duration) (rate, work, capDiv float64) {
	rate, work, capDiv = 1, 1, 1
	if period <= 0 {
		return
	}
	pos := (t - s.Offset%period) % period
	if pos < 0 {
		pos += period
	}
	if pos < period/3 {
		switch s.Incident {
		case Spike:
			rate = s.Factor
		case SlowDownstream:
			work = s.Factor
		case CapacityDrop:
			capDiv = s.Factor
		}
	}
	return
}
