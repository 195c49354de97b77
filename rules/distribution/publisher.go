package distribution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// Sentinel errors of the package.
var (
	// ErrConflict: the same version number with different content.
	ErrConflict = errors.New("distribution: conflict")
	// ErrInvalid: bad input, refused before anything was written.
	ErrInvalid = errors.New("distribution: invalid input")
	// ErrNoCanary: promote or abort without a staged version.
	ErrNoCanary = errors.New("distribution: no canary")
	// ErrStale: a canary that is not newer than the stable version (wrapped
	// together with ErrInvalid).
	ErrStale = errors.New("distribution: not newer than the stable version")
	// ErrUnavailable: NATS could not be reached or refused the operation.
	ErrUnavailable = errors.New("distribution: unavailable")
	// ErrTooLarge: the value is larger than the NATS server accepts (wrapped
	// together with ErrInvalid in a *TooLargeError). Retrying does not help.
	ErrTooLarge = errors.New("distribution: larger than the NATS max payload")
)

// KVHeaderRoom is the part of the server's max_payload kept for the headers
// of a KV write (the expected revision, about 70 bytes); the value may use
// the rest.
const KVHeaderRoom = 512

// TooLargeError says which version did not fit the server, by how much.
type TooLargeError struct {
	Service string
	Version int64
	// Key is the KV key the value was meant for.
	Key string
	// Size is the value's size in bytes; Limit the most the server accepts
	// for a value (its max_payload, MaxPayload, less KVHeaderRoom).
	Size, Limit int
	MaxPayload  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: %s version %d is %d bytes for key %s, at most %d fit the server's max_payload of %d bytes",
		ErrTooLarge, e.Service, e.Version, e.Size, e.Key, e.Limit, e.MaxPayload)
}

// Unwrap makes errors.Is true for ErrTooLarge and ErrInvalid.
func (e *TooLargeError) Unwrap() []error { return []error{ErrTooLarge, ErrInvalid} }

// PublisherOptions configure the KV bucket.
type PublisherOptions struct {
	// Names gives the bucket and keys; the zero value uses the default prefix.
	Names watch.Names
	// Replicas of the bucket's stream; default 1 (3 on a production cluster).
	Replicas int
	// History kept per key; default 5.
	History uint8
	// Storage is file (default) or memory.
	Storage jetstream.StorageType
	// Timeout bounds one KV operation; default 5s.
	Timeout time.Duration
}

// DefaultPublisherOptions returns the defaults.
func DefaultPublisherOptions() PublisherOptions {
	return PublisherOptions{Replicas: 1, History: 5, Storage: jetstream.FileStorage, Timeout: 5 * time.Second}
}

// Publisher writes versions to the KV bucket keyed by service.
type Publisher struct {
	kv    jetstream.KeyValue
	nc    *nats.Conn // for the server's max_payload; nil if unknown
	names watch.Names
	opts  PublisherOptions
}

// Outcome says what a publication did.
type Outcome string

// Publication outcomes.
const (
	Published  Outcome = "published"  // the version is now in the bucket
	Duplicate  Outcome = "duplicate"  // the bucket already had this version
	Superseded Outcome = "superseded" // the bucket has a newer version: nothing written
	Staged     Outcome = "canary"     // written to the canary key (RelayOptions.Stage)
)

// NewPublisher creates or updates the bucket and returns a publisher.
func NewPublisher(ctx context.Context, js jetstream.JetStream, opts PublisherOptions) (*Publisher, error) {
	d := DefaultPublisherOptions()
	if opts.Replicas <= 0 {
		opts.Replicas = d.Replicas
	}
	if opts.History == 0 {
		opts.History = d.History
	}
	if opts.Timeout <= 0 {
		opts.Timeout = d.Timeout
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(cctx, jetstream.KeyValueConfig{
		Bucket:      opts.Names.Bucket(),
		Description: "Governor: the rule version each service runs",
		History:     opts.History,
		Replicas:    opts.Replicas,
		Storage:     opts.Storage,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %w", ErrUnavailable, opts.Names.Bucket(), err)
	}
	return &Publisher{kv: kv, nc: js.Conn(), names: opts.Names, opts: opts}, nil
}

// MaxValueBytes returns the largest value the connected server accepts in
// one KV write (its max_payload less KVHeaderRoom), or 0 while that is not
// known (never connected).
func (p *Publisher) MaxValueBytes() int {
	if p.nc == nil {
		return 0
	}
	mp := p.nc.MaxPayload()
	if mp <= 0 {
		return 0
	}
	return int(max(mp-KVHeaderRoom, 0))
}

// fits refuses a value the server would refuse, with a *TooLargeError.
func (p *Publisher) fits(env *rules.Envelope, key string, size int) error {
	limit := p.MaxValueBytes()
	if limit == 0 || size <= limit {
		return nil
	}
	return &TooLargeError{Service: env.Service, Version: env.Version, Key: key, Size: size, Limit: limit,
		MaxPayload: p.nc.MaxPayload()}
}

// Names returns the names in use.
func (p *Publisher) Names() watch.Names { return p.names }

// Publish writes the envelope (the verbatim outbox payload) to the service's
// stable key unless the key already holds this or a newer version. It is
// safe against concurrent publishers: the write is a compare-and-set on the
// key's revision. A payload larger than the server accepts (MaxValueBytes)
// is refused with a *TooLargeError before anything is written.
func (p *Publisher) Publish(ctx context.Context, payload []byte) (Outcome, *rules.Envelope, error) {
	env, err := rules.DecodeEnvelope(payload)
	if err != nil {
		return "", nil, fmt.Errorf("%w: envelope: %w", ErrInvalid, err)
	}
	out, err := p.put(ctx, p.names.StableKey(env.Service), env, payload)
	return out, env, err
}

// put writes value under key if the key holds no envelope of this or a newer
// version and the value fits the server.
func (p *Publisher) put(ctx context.Context, key string, env *rules.Envelope, value []byte) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	for {
		cur, err := p.kv.Get(ctx, key)
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// deleted or never written: rev stays 0 unless a delete marker exists
			if cur != nil {
				rev = cur.Revision()
			}
		case err != nil:
			return "", fmt.Errorf("%w: get %s: %w", ErrUnavailable, key, err)
		default:
			rev = cur.Revision()
			if have, ok := versionIn(cur.Value()); ok {
				switch {
				case have.Version > env.Version:
					return Superseded, nil
				case have.Version == env.Version && have.Checksum == env.Checksum:
					return Duplicate, nil
				case have.Version == env.Version:
					return "", fmt.Errorf("%w: %s version %d is already published with checksum %s, not %s",
						ErrConflict, env.Service, env.Version, have.Checksum, env.Checksum)
				}
			}
		}
		if err := p.fits(env, key, len(value)); err != nil {
			return "", err
		}
		if rev == 0 {
			_, err = p.kv.Create(ctx, key, value)
		} else {
			_, err = p.kv.Update(ctx, key, value, rev)
		}
		switch {
		case err == nil:
			return Published, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // another publisher wrote first: look again
		default:
			return "", fmt.Errorf("%w: put %s: %w", ErrUnavailable, key, err)
		}
	}
}

// versionIn reads the version and checksum of a stored stable value.
func versionIn(value []byte) (*rules.Envelope, bool) {
	var e rules.Envelope
	if json.Unmarshal(value, &e) != nil || e.Version <= 0 {
		return nil, false
	}
	return &e, true
}

// Latest returns the stable envelope of a service; (nil, nil) if none.
func (p *Publisher) Latest(ctx context.Context, service string) (*rules.Envelope, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	e, err := p.kv.Get(ctx, p.names.StableKey(service))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: get %s: %w", ErrUnavailable, service, err)
	}
	env, err := rules.DecodeEnvelope(e.Value())
	if err != nil {
		return nil, fmt.Errorf("%w: stored envelope of %s: %w", ErrInvalid, service, err)
	}
	return env, nil
}

// Canary returns the staged version of a service; (nil, nil) if none.
func (p *Publisher) Canary(ctx context.Context, service string) (*watch.Canary, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	e, err := p.kv.Get(ctx, p.names.CanaryKey(service))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: get canary of %s: %w", ErrUnavailable, service, err)
	}
	c, err := watch.DecodeCanary(e.Value())
	if err != nil {
		return nil, fmt.Errorf("%w: stored canary of %s: %w", ErrInvalid, service, err)
	}
	return c, nil
}

// StartCanary stages the envelope to the instances sel picks. The version
// must be newer than the stable one, and the canary record must fit the
// server (else a *TooLargeError); a running canary of the service is
// replaced.
func (p *Publisher) StartCanary(ctx context.Context, payload []byte, sel watch.Selector) (*rules.Envelope, error) {
	env, err := rules.DecodeEnvelope(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: envelope: %w", ErrInvalid, err)
	}
	if err := sel.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	stable, err := p.Latest(ctx, env.Service)
	if err != nil {
		return nil, err
	}
	if stable != nil && stable.Version >= env.Version {
		return nil, fmt.Errorf("%w: %w: canary version %d of %s, stable version %d",
			ErrInvalid, ErrStale, env.Version, env.Service, stable.Version)
	}
	value, err := watch.EncodeCanary(&watch.Canary{Selector: sel, Envelope: env})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := p.fits(env, p.names.CanaryKey(env.Service), len(value)); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	if _, err := p.kv.Put(cctx, p.names.CanaryKey(env.Service), value); err != nil {
		return nil, fmt.Errorf("%w: put canary of %s: %w", ErrUnavailable, env.Service, err)
	}
	return env, nil
}

// Promote publishes the staged version to every instance, then removes the
// canary. It returns the promoted envelope.
func (p *Publisher) Promote(ctx context.Context, service string) (*rules.Envelope, error) {
	c, err := p.Canary(ctx, service)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: %s has no staged version to promote", ErrNoCanary, service)
	}
	payload, err := json.Marshal(c.Envelope)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := p.put(ctx, p.names.StableKey(service), c.Envelope, payload); err != nil {
		return nil, err
	}
	return c.Envelope, p.deleteCanary(ctx, service)
}

// Abort removes the staged version; the canary instances return to the
// stable version. It returns the aborted envelope.
func (p *Publisher) Abort(ctx context.Context, service string) (*rules.Envelope, error) {
	c, err := p.Canary(ctx, service)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: %s has no staged version to abort", ErrNoCanary, service)
	}
	return c.Envelope, p.deleteCanary(ctx, service)
}

func (p *Publisher) deleteCanary(ctx context.Context, service string) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	if err := p.kv.Delete(ctx, p.names.CanaryKey(service)); err != nil {
		return fmt.Errorf("%w: delete canary of %s: %w", ErrUnavailable, service, err)
	}
	return nil
}
