package transport

import "governor.dev/governor/sdk/balancer"

// balancerPick is an optional balancer pick.
type balancerPick struct {
	p  balancer.Pick
	ok bool
}
