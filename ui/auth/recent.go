package auth

import (
	"sync"
	"time"
)

// recentSessions remembers recently validated sessions (by id hash) for the
// database outage fallback. It holds at most maxRecent entries.
type recentSessions struct {
	grace time.Duration
	mu    sync.Mutex
	m     map[string]recentEntry
}

type recentEntry struct {
	p       *Principal
	checked time.Time
}

const maxRecent = 10_000

func newRecentSessions(grace time.Duration) *recentSessions {
	return &recentSessions{grace: grace, m: map[string]recentEntry{}}
}

func (r *recentSessions) put(h string, p *Principal, now time.Time) {
	if r.grace <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxRecent {
		for k, e := range r.m {
			if now.Sub(e.checked) > r.grace || len(r.m) >= maxRecent {
				delete(r.m, k)
			}
		}
	}
	r.m[h] = recentEntry{p: p, checked: now}
}

// get returns the principal if it was validated within the grace period and
// its session has not expired.
func (r *recentSessions) get(h string, now time.Time) *Principal {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[h]
	if !ok || now.Sub(e.checked) > r.grace || !now.Before(e.p.Session.ExpiresAt) || !now.Before(e.p.Session.IdleExpiresAt) {
		return nil
	}
	cp := *e.p
	cp.Degraded = true
	return &cp
}

func (r *recentSessions) forget(h string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, h)
}

func (r *recentSessions) forgetUser(user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, e := range r.m {
		if e.p.User.Name == user {
			delete(r.m, k)
		}
	}
}
