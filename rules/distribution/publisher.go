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
	// ErrNoCanary: promote, abort or selector change without a staged
	// version.
	ErrNoCanary = errors.New("distribution: no canary")
	// ErrStale: a canary that is not newer than the stable version or than
	// a version staged before, a promotion overtaken by a newer stable
	// version, an abort of a canary a newer one replaced, or a promotion,
	// abort or selector change of a version that is not the one staged
	// (wrapped together with ErrInvalid).
	ErrStale = errors.New("distribution: stale version")
	// ErrUnavailable: NATS could not be reached or refused the operation.
	ErrUnavailable = errors.New("distribution: unavailable")
	// ErrTooLarge: the value is larger than the NATS server accepts (wrapped
	// together with ErrInvalid in a *TooLargeError). Retrying does not help.
	ErrTooLarge = errors.New("distribution: larger than the NATS max payload")
)

// conflictHint ends the text of an ErrConflict: how the same version comes
// to have two contents.
const conflictHint = " (was the rules database reset or restored from a backup, or does another installation use this bucket?)"

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
	// History kept per key; default 5, at least 2: the canary key's last
	// staged version must outlive the delete marker of its abort or
	// promotion, so that it is never staged again (StartCanary).
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
	Superseded Outcome = "superseded" // the bucket has a newer version, or the canary was aborted: nothing written
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
	if opts.History < 2 {
		return nil, fmt.Errorf("%w: publisher: History must be at least 2, not %d", ErrInvalid, opts.History)
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
	out, _, err := p.put(ctx, p.names.StableKey(env.Service), env, payload)
	return out, env, err
}

// publish is Publish that also returns, when the outcome is Superseded,
// the envelope the stable key holds.
func (p *Publisher) publish(ctx context.Context, payload []byte) (_ Outcome, newer *rules.Envelope, _ error) {
	env, err := rules.DecodeEnvelope(payload)
	if err != nil {
		return "", nil, fmt.Errorf("%w: envelope: %w", ErrInvalid, err)
	}
	return p.put(ctx, p.names.StableKey(env.Service), env, payload)
}

// put writes value under key if the key holds no envelope of this or a newer
// version and the value fits the server. When the outcome is Superseded,
// newer is the envelope the key holds (its version and checksum at least).
func (p *Publisher) put(ctx context.Context, key string, env *rules.Envelope, value []byte) (_ Outcome, newer *rules.Envelope, _ error) {
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
			return "", nil, fmt.Errorf("%w: get %s: %w", ErrUnavailable, key, err)
		default:
			rev = cur.Revision()
			if have, ok := versionIn(cur.Value()); ok {
				switch {
				case have.Version > env.Version:
					return Superseded, have, nil
				case have.Version == env.Version && have.Checksum == env.Checksum:
					return Duplicate, nil, nil
				case have.Version == env.Version:
					return "", nil, fmt.Errorf("%w: %s version %d is already published with checksum %s, not %s%s",
						ErrConflict, env.Service, env.Version, have.Checksum, env.Checksum, conflictHint)
				}
			}
		}
		if err := p.fits(env, key, len(value)); err != nil {
			return "", nil, err
		}
		if rev == 0 {
			_, err = p.kv.Create(ctx, key, value)
		} else {
			_, err = p.kv.Update(ctx, key, value, rev)
		}
		switch {
		case err == nil:
			return Published, nil, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // another publisher wrote first: look again
		default:
			return "", nil, fmt.Errorf("%w: put %s: %w", ErrUnavailable, key, err)
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
	c, _, err := p.canary(ctx, service)
	return c, err
}

// canary returns the staged version of a service and the revision of its
// record; (nil, 0, nil) if none.
func (p *Publisher) canary(ctx context.Context, service string) (*watch.Canary, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	e, err := p.kv.Get(ctx, p.names.CanaryKey(service))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: get canary of %s: %w", ErrUnavailable, service, err)
	}
	c, err := watch.DecodeCanary(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("%w: stored canary of %s: %w", ErrInvalid, service, err)
	}
	return c, e.Revision(), nil
}

// staleError refuses a canary that is not newer than what the bucket has
// or had. It is an ErrStale and an ErrInvalid; the relay reads the fields
// to tell a row it already staged from one it must not stage.
type staleError struct {
	service string
	version int64 // the version refused
	// stable is the stable version when it is this or a newer one.
	stable int64
	// staged is the newest version staged before, when it is this or a newer
	// one; running says it is still staged (with the same content, if it is
	// this version), else it was aborted or promoted.
	staged  int64
	running bool
	// selector is the running canary's (running only): a person may have
	// changed it since it was staged (SetCanarySelector).
	selector watch.Selector
}

func (e *staleError) Error() string {
	var why string
	switch {
	case e.stable > 0:
		why = fmt.Sprintf("stable version %d", e.stable)
	case e.running && e.staged == e.version:
		why = "already the running canary"
	case e.running:
		why = fmt.Sprintf("running canary version %d", e.staged)
	default:
		why = fmt.Sprintf("version %d was staged before and withdrawn (aborted or promoted)", e.staged)
	}
	return fmt.Sprintf("%s: %s: canary version %d of %s: %s", ErrInvalid, ErrStale, e.version, e.service, why)
}

// Unwrap makes errors.Is true for ErrStale and ErrInvalid.
func (e *staleError) Unwrap() []error { return []error{ErrStale, ErrInvalid} }

// StartCanary stages the envelope to the instances sel picks, replacing an
// older running canary. Canary versions only go forward, as stable ones
// do: a version that is not newer than the stable one, the running canary
// or any version staged before (aborted or promoted) is refused with an
// error wrapping ErrStale and ErrInvalid, so a relay retrying an old row
// never replaces a newer canary nor stages again one the operator aborted.
// The same version staged with other content is an ErrConflict. The
// canary record must fit the server (else a *TooLargeError). The write is
// a compare-and-set on the canary key's revision.
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
		return nil, &staleError{service: env.Service, version: env.Version, stable: stable.Version}
	}
	value, err := watch.EncodeCanary(&watch.Canary{Selector: sel, Envelope: env})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	key := p.names.CanaryKey(env.Service)
	if err := p.fits(env, key, len(value)); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	for {
		// The history, not only the current value: an aborted or promoted
		// canary survives there behind its delete marker.
		hist, err := p.kv.History(cctx, key)
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// never staged
		case err != nil:
			return nil, fmt.Errorf("%w: history of canary of %s: %w", ErrUnavailable, env.Service, err)
		default:
			rev = hist[len(hist)-1].Revision()
			if err := staleCanary(env, hist); err != nil {
				return nil, err
			}
		}
		if rev == 0 {
			_, err = p.kv.Create(cctx, key, value)
		} else {
			_, err = p.kv.Update(cctx, key, value, rev)
		}
		switch {
		case err == nil:
			return env, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // staged, aborted or promoted meanwhile: look again
		default:
			return nil, fmt.Errorf("%w: put canary of %s: %w", ErrUnavailable, env.Service, err)
		}
	}
}

// staleCanary refuses env if the canary key's history (oldest first) holds
// a canary of this or a newer version.
func staleCanary(env *rules.Envelope, hist []jetstream.KeyValueEntry) error {
	if c, ok := stagedIn(hist[len(hist)-1]); ok && c.Envelope.Version >= env.Version {
		if c.Envelope.Version == env.Version && c.Envelope.Checksum != env.Checksum {
			return fmt.Errorf("%w: %s version %d is already staged with checksum %s, not %s%s",
				ErrConflict, env.Service, env.Version, c.Envelope.Checksum, env.Checksum, conflictHint)
		}
		return &staleError{service: env.Service, version: env.Version, staged: c.Envelope.Version, running: true,
			selector: c.Selector}
	}
	var newest int64
	for _, e := range hist {
		if c, ok := stagedIn(e); ok {
			newest = max(newest, c.Envelope.Version)
		}
	}
	if newest >= env.Version {
		return &staleError{service: env.Service, version: env.Version, staged: newest}
	}
	return nil
}

// stagedIn returns the canary an entry of the canary key staged; false for
// a delete marker, or a record that does not decode (not a version staged:
// StartCanary may replace it).
func stagedIn(e jetstream.KeyValueEntry) (*watch.Canary, bool) {
	if e.Operation() != jetstream.KeyValuePut {
		return nil, false
	}
	c, err := watch.DecodeCanary(e.Value())
	return c, err == nil
}

// Promote publishes the staged version to every instance, then removes the
// canary, and returns the promoted envelope. A canary staged meanwhile (a
// newer version) stays staged. If a newer version reached the stable key
// while this one was staged (a rollback, or a version published without a
// canary), nothing is promoted: the canary, which no instance runs any more,
// is withdrawn as by Abort, and the error wraps ErrStale and ErrInvalid.
func (p *Publisher) Promote(ctx context.Context, service string) (*rules.Envelope, error) {
	return p.promote(ctx, service, 0)
}

// PromoteVersion is Promote of the canary of version, the one the caller
// looked at: if another version is staged, nothing is promoted and the error
// wraps ErrStale and ErrInvalid. Only the record read is promoted, so a
// canary replaced after the check is never promoted in its place.
func (p *Publisher) PromoteVersion(ctx context.Context, service string, version int64) (*rules.Envelope, error) {
	if err := versionArg(version); err != nil {
		return nil, err
	}
	return p.promote(ctx, service, version)
}

// promote promotes the staged canary, which must be of version unless
// version is 0.
func (p *Publisher) promote(ctx context.Context, service string, version int64) (*rules.Envelope, error) {
	c, rev, err := p.staged(ctx, service, "promote", version)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(c.Envelope)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	out, stable, err := p.put(ctx, p.names.StableKey(service), c.Envelope, payload)
	if err != nil {
		return nil, err
	}
	if _, err := p.deleteCanary(ctx, service, rev); err != nil {
		return nil, err
	}
	if out == Superseded {
		return nil, fmt.Errorf("%w: %w: canary version %d of %s not promoted: stable version %d is newer",
			ErrInvalid, ErrStale, c.Envelope.Version, service, stable.Version)
	}
	return c.Envelope, nil
}

// Abort removes the staged version; the canary instances return to the
// stable version. It returns the aborted envelope. If a newer canary
// replaced the one read meanwhile, that one stays staged and the error
// wraps ErrStale and ErrInvalid.
func (p *Publisher) Abort(ctx context.Context, service string) (*rules.Envelope, error) {
	return p.abort(ctx, service, 0)
}

// AbortVersion is Abort of the canary of version, the one the caller looked
// at: if another version is staged, it stays staged and the error wraps
// ErrStale and ErrInvalid.
func (p *Publisher) AbortVersion(ctx context.Context, service string, version int64) (*rules.Envelope, error) {
	if err := versionArg(version); err != nil {
		return nil, err
	}
	return p.abort(ctx, service, version)
}

// abort removes the staged canary, which must be of version unless version
// is 0.
func (p *Publisher) abort(ctx context.Context, service string, version int64) (*rules.Envelope, error) {
	c, rev, err := p.staged(ctx, service, "abort", version)
	if err != nil {
		return nil, err
	}
	deleted, err := p.deleteCanary(ctx, service, rev)
	if err != nil {
		return nil, err
	}
	if !deleted {
		return nil, fmt.Errorf("%w: %w: canary version %d of %s not aborted: a newer canary replaced it and stays staged",
			ErrInvalid, ErrStale, c.Envelope.Version, service)
	}
	return c.Envelope, nil
}

// versionArg checks the version a caller says it looked at.
func versionArg(version int64) error {
	if version < 1 {
		return fmt.Errorf("%w: version: must be a version number, not %d", ErrInvalid, version)
	}
	return nil
}

// staged returns the service's staged canary and its record's revision, for
// action: an error wrapping ErrNoCanary if none is staged, or ErrStale and
// ErrInvalid, naming both versions, if it is not of version (0: any).
func (p *Publisher) staged(ctx context.Context, service, action string, version int64) (*watch.Canary, uint64, error) {
	c, rev, err := p.canary(ctx, service)
	switch {
	case err != nil:
		return nil, 0, err
	case c == nil:
		return nil, 0, fmt.Errorf("%w: %s has no staged version to %s", ErrNoCanary, service, action)
	case version != 0 && c.Envelope.Version != version:
		return nil, 0, fmt.Errorf("%w: %w: cannot %s canary version %d of %s: version %d is staged now",
			ErrInvalid, ErrStale, action, version, service, c.Envelope.Version)
	}
	return c, rev, nil
}

// SetCanarySelector changes which instances run the staged canary of
// version (a 10 % canary widened to 50 %, say) and returns its envelope.
// StartCanary refuses the running version again, as a relay retrying a row
// must; this is how a person restages it to another share. If no canary is
// staged the error wraps ErrNoCanary; if another version is, ErrStale and
// ErrInvalid. The write is a compare-and-set on the canary record's
// revision, so a canary replaced, promoted or aborted meanwhile is never
// brought back.
func (p *Publisher) SetCanarySelector(ctx context.Context, service string, version int64, sel watch.Selector) (*rules.Envelope, error) {
	if err := sel.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := versionArg(version); err != nil {
		return nil, err
	}
	for {
		c, rev, err := p.staged(ctx, service, "change", version)
		if err != nil {
			return nil, err
		}
		value, err := watch.EncodeCanary(&watch.Canary{Selector: sel, Envelope: c.Envelope})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		key := p.names.CanaryKey(service)
		if err := p.fits(c.Envelope, key, len(value)); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
		_, err = p.kv.Update(cctx, key, value, rev)
		cancel()
		switch {
		case err == nil:
			return c.Envelope, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // replaced, promoted or aborted meanwhile: look again
		default:
			return nil, fmt.Errorf("%w: put canary of %s: %w", ErrUnavailable, service, err)
		}
	}
}

// deleteCanary removes the service's canary record if its revision is
// still rev, and reports whether it did: a canary staged after rev is
// another version, which the caller did not mean to remove.
func (p *Publisher) deleteCanary(ctx context.Context, service string, rev uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	err := p.kv.Delete(ctx, p.names.CanaryKey(service), jetstream.LastRevision(rev))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return false, nil
	default:
		return false, fmt.Errorf("%w: delete canary of %s: %w", ErrUnavailable, service, err)
	}
}
