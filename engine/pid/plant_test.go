package pid

import (
	"math"
	"time"
)

// plant is a simulated process: advance it by h seconds with input u.
type plant interface {
	step(u, h float64)
	output() float64
}

// fopdt is a first-order process with dead time: tau dy/dt = -y + k u(t-theta).
type fopdt struct {
	k, tau float64
	delay  *deadTime
	y      float64
}

func (p *fopdt) step(u, h float64) {
	ud := p.delay.push(u)
	p.y += (1 - math.Exp(-h/p.tau)) * (p.k*ud - p.y)
}
func (p *fopdt) output() float64 { return p.y }

// integrating is dy/dt = k (u(t-theta) - load).
type integrating struct {
	k, load float64
	delay   *deadTime
	y       float64
}

func (p *integrating) step(u, h float64) {
	ud := p.delay.push(u)
	p.y += p.k * (ud - p.load) * h
}
func (p *integrating) output() float64 { return p.y }

// deadTime delays its input by a whole number of simulation steps.
type deadTime struct {
	buf []float64
	i   int
}

func newDeadTime(theta, h float64) *deadTime {
	n := int(math.Round(theta / h))
	return &deadTime{buf: make([]float64, max(n, 1))}
}

// push returns the input of len(buf) steps ago (at least one step of delay,
// negligible at h << tau).
func (d *deadTime) push(u float64) float64 {
	out := d.buf[d.i]
	d.buf[d.i] = u
	d.i = (d.i + 1) % len(d.buf)
	return out
}

// trace records a closed-loop run.
type trace struct {
	t, y, u, sp []float64
}

// loop runs the controller against the plant: the plant is simulated in
// steps of h seconds, the controller ticks at the times next returns (after
// the previous tick), with a zero-order hold on its output in between.
// spAt gives the setpoint over time.
func loop(c *Controller, p plant, h, until float64, next func(prev float64) float64, spAt func(t float64) float64) (trace, error) {
	var tr trace
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u, err := c.Update(t0, spAt(0), p.output())
	if err != nil {
		return tr, err
	}
	tick := next(0)
	for t := 0.0; t < until; {
		p.step(u, h)
		t += h
		if t+1e-9 >= tick {
			sp := spAt(t)
			u, err = c.Update(t0.Add(time.Duration(t*float64(time.Second))), sp, p.output())
			if err != nil {
				return tr, err
			}
			tick = next(tick)
			tr.t = append(tr.t, t)
			tr.y = append(tr.y, p.output())
			tr.u = append(tr.u, u)
			tr.sp = append(tr.sp, sp)
		}
	}
	return tr, nil
}

// regular ticks every d seconds.
func regular(d float64) func(float64) float64 { return func(p float64) float64 { return p + d } }

// jittered ticks every d*(1±j), from a fixed-seed generator.
func jittered(d, j float64, seed uint64) func(float64) float64 {
	x := seed
	return func(p float64) float64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		r := float64(x%10000) / 10000 // [0,1)
		return p + d*(1-j+2*j*r)
	}
}

// stepMetrics measures the response after a setpoint step at time from to
// level sp, starting from y0: overshoot (share of the step), settling time
// into a band (share of the step) and the final error.
func stepMetrics(tr trace, from, sp, y0, band float64) (overshoot, settling, finalErr float64) {
	size := sp - y0
	settling = -1
	for i, t := range tr.t {
		if t < from {
			continue
		}
		if o := (tr.y[i] - sp) / size; o > overshoot {
			overshoot = o
		}
		if math.Abs(tr.y[i]-sp) > band*math.Abs(size) {
			settling = t - from
		}
	}
	finalErr = math.Abs(tr.y[len(tr.y)-1]-sp) / math.Abs(size)
	return overshoot, settling, finalErr
}
