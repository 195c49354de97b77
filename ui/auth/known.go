package auth

import (
	"sync"
	"time"
)

// knownSourceTTL is how long a client address that logged in as a user
// stays known for that user.
const knownSourceTTL = 30 * 24 * time.Hour

// maxKnownSources bounds the memory of a Manager's knownSources.
const maxKnownSources = 100_000

// knownSources remembers the client addresses (throttle keys) from which
// each user name logged in successfully in the last knownSourceTTL. While a
// name's login bucket is spent, attempts from its known addresses still go
// through (within their address's own limit): someone guessing from
// elsewhere, even at the rate their address is allowed, keeps the name's
// bucket empty, and must not so shut its owner out for as long as they
// keep at it.
type knownSources struct {
	limit int
	mu    sync.Mutex
	m     map[string]time.Time
}

// newKnownSources remembers at most limit entries.
func newKnownSources(limit int) *knownSources {
	return &knownSources{limit: limit, m: map[string]time.Time{}}
}

// key is the entry of name logging in from the address throttle key addr,
// a digest so that entries stay small whatever the name's length.
func (k *knownSources) key(name, addr string) string { return hashSecret(name + "\x00" + addr) }

// add records a successful login of name from addr at now.
func (k *knownSources) add(name, addr string, now time.Time) {
	key := k.key(name, addr)
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[key]; !ok && len(k.m) >= k.limit {
		k.evict(now)
	}
	k.m[key] = now
}

// evict drops the entries older than knownSourceTTL and, if that frees
// nothing, a tenth of the rest at random. Entries come only from
// successful logins, so nobody without a password can fill the map.
func (k *knownSources) evict(now time.Time) {
	for key, t := range k.m {
		if now.Sub(t) > knownSourceTTL {
			delete(k.m, key)
		}
	}
	for key := range k.m {
		if len(k.m) < k.limit*9/10 {
			break
		}
		delete(k.m, key)
	}
}

// has reports whether name logged in from addr within knownSourceTTL.
func (k *knownSources) has(name, addr string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.m[k.key(name, addr)]
	return ok && now.Sub(t) <= knownSourceTTL
}
