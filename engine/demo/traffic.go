package demo

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"governor.dev/governor/sdk/rules"
)

// generator is an open-loop load generator for one service: it sends
// requests at the service's rate (times the incident's multiplier) whatever
// the answers, round-robin over the instances, with mixed priorities.
type generator struct {
	svc       *Service
	instances []*instance
	f         *Fleet
	client    *http.Client
}

// mix is the share of each class in the generated traffic.
var mix = [4]float64{0.1, 0.3, 0.3, 0.3}

func newGenerator(svc *Service, instances []*instance, f *Fleet) *generator {
	return &generator{svc: svc, instances: instances, f: f, client: &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 512},
	}}
}

func (g *generator) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer g.client.CloseIdleConnections()
	const tick = 20 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	var carry float64
	next := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rate, _, _ := g.f.phase(g.svc)
		carry += g.svc.Rate * rate * tick.Seconds()
		for ; carry >= 1; carry-- {
			in := g.instances[next%len(g.instances)]
			next++
			wg.Go(func() { g.one(ctx, in) })
		}
	}
}

func (g *generator) one(ctx context.Context, in *instance) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.url()+"/api/work", nil)
	if err != nil {
		return
	}
	req.Header.Set("X-Traffic-Priority", string(rules.Classes[pick(rand.Float64())]))
	req.Header.Set("X-User", "user-"+strconv.Itoa(rand.IntN(500)))
	resp, err := g.client.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func pick(u float64) int {
	for c, share := range mix {
		if u < share {
			return c
		}
		u -= share
	}
	return len(mix) - 1
}
