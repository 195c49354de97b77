package watch

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrInvalidOption is wrapped by every refused option.
var ErrInvalidOption = errors.New("watch: invalid option")

// DefaultPrefix is the default prefix of the bucket and subject names.
const DefaultPrefix = "governor"

var prefixRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Names derives the JetStream KV bucket, keys and subjects of rule
// distribution from a prefix, so several Governor installations (or parallel
// tests) can share one NATS account. The control plane and the SDK use the
// same Names.
//
// With prefix "governor": bucket "governor_rules", key "<service>.stable" for
// the version every instance runs, key "<service>.canary" for a staged
// version (a watcher follows both with the one filter "<service>.*", which
// NATS servers before 2.10 support too),
// subjects "governor.rules.report.<service>" for ACK / NACK and
// "governor.rules.heartbeat.<service>" for heartbeats. Service names are
// escaped for keys and subjects (see ServiceToken).
type Names struct {
	prefix string
}

// NewNames validates the prefix (letters, digits, '_' and '-'; empty means
// DefaultPrefix).
func NewNames(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(prefix) {
		return Names{}, fmt.Errorf("%w: prefix %q: use 1 to 64 letters, digits, '_' or '-'", ErrInvalidOption, prefix)
	}
	return Names{prefix: prefix}, nil
}

// Prefix returns the prefix.
func (n Names) Prefix() string {
	if n.prefix == "" {
		return DefaultPrefix
	}
	return n.prefix
}

// Bucket is the KV bucket holding the published versions.
func (n Names) Bucket() string { return n.Prefix() + "_rules" }

// StableKey is the key holding the version every instance of the service runs.
func (n Names) StableKey(service string) string { return ServiceToken(service) + ".stable" }

// CanaryKey is the key holding a staged version and its selector.
func (n Names) CanaryKey(service string) string { return ServiceToken(service) + ".canary" }

// ServiceKeys is the KV key filter matching both keys of the service.
func (n Names) ServiceKeys(service string) string { return ServiceToken(service) + ".*" }

// ReportSubject carries the service's ACK / NACK reports.
func (n Names) ReportSubject(service string) string {
	return n.Prefix() + ".rules.report." + ServiceToken(service)
}

// HeartbeatSubject carries the service's heartbeats.
func (n Names) HeartbeatSubject(service string) string {
	return n.Prefix() + ".rules.heartbeat." + ServiceToken(service)
}

// ReportWildcard matches the reports of every service.
func (n Names) ReportWildcard() string { return n.Prefix() + ".rules.report.*" }

// HeartbeatWildcard matches the heartbeats of every service.
func (n Names) HeartbeatWildcard() string { return n.Prefix() + ".rules.heartbeat.*" }

// ServiceToken escapes a service name into one NATS subject token that is
// also a valid KV key: letters, digits, '-' and '_' stay, every other byte
// becomes '=' followed by two upper-case hex digits ("checkout.v2" ->
// "checkout=2Ev2"). The mapping is one-to-one.
func ServiceToken(service string) string {
	var b strings.Builder
	b.Grow(len(service))
	for i := 0; i < len(service); i++ {
		c := service[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}
