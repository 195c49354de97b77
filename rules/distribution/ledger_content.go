package distribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/watch"
)

// contentCheck is what a report or heartbeat says of the content its
// instance runs, and the checksum the rules store has for that version
// (published, filled by Ledger.lookUp before the message is recorded; ""
// when unknown or not asked).
type contentCheck struct {
	version   int64
	runs      string
	published string
	// The message's own NACK: version, checksum of the refused content,
	// reason and error.
	nackVersion           int64
	nackSum               string
	nackReason, nackError string
}

func reportContent(r *watch.Report) *contentCheck {
	c := &contentCheck{version: r.Running, runs: r.RunningChecksum}
	if r.Status == watch.StatusNACK {
		c.nackVersion, c.nackSum, c.nackReason, c.nackError = r.Version, r.Checksum, string(r.Reason), r.Error
	}
	return c
}

func heartbeatContent(h *watch.Heartbeat) *contentCheck {
	return &contentCheck{version: h.Running, runs: h.RunningChecksum, nackVersion: h.NackVersion,
		nackSum: h.NackChecksum, nackReason: string(h.NackReason), nackError: h.NackError}
}

// nack is an instance's recorded NACK.
type nack struct {
	version       int64
	reason, error string
	at            time.Time
}

func nackOf(in *Instance) nack {
	return nack{in.NackVersion, in.NackReason, in.NackError, in.NackAt}
}

// record updates the instance's NackOtherContent record after the message
// recorded what the instance runs and its NACK; was is the NACK recorded
// before the message. The record is cleared once the instance runs another
// version, or reports the store's content; it is written when the instance
// reports other content than the store's for the version it runs (with its
// own refusal of the published content, if the message carries one). A
// record that stays the same keeps its time.
func (c *contentCheck) record(in *Instance, was nack, now time.Time) {
	compared := c.runs != "" && c.published != "" && c.version == in.Running
	switch {
	case in.NackReason == NackOtherContent && (in.NackVersion != in.Running || (compared && c.runs == c.published)):
		in.NackVersion, in.NackReason, in.NackError, in.NackAt = 0, "", "", time.Time{}
		return
	case !compared || c.version == 0 || c.runs == c.published:
		return
	}
	msg := fmt.Sprintf("runs other content of version %d: checksum %s, published %s", c.version, c.runs, c.published)
	if c.nackVersion == c.version && c.nackError != "" && (c.nackSum == "" || c.nackSum == c.published) {
		msg += "; refused it: " + c.nackReason + ": " + storable(c.nackError)
	}
	in.NackVersion, in.NackReason, in.NackError, in.NackAt = c.version, NackOtherContent, msg, now
	if was.version == in.NackVersion && was.reason == in.NackReason && was.error == in.NackError {
		in.NackAt = was.at
	}
}

// lookUp fills c.published with the checksum the rules store has for the
// version the message says runs, when the message gives the checksum of
// its content and LedgerOptions.Checksum is set; from the cache when it
// was read since the last sweep. A lookup that fails leaves it empty: the
// message is recorded without the comparison.
func (l *Ledger) lookUp(ctx context.Context, service string, c *contentCheck) {
	if l.o.Checksum == nil || c == nil || c.runs == "" || c.version <= 0 {
		return
	}
	key := versionKey{service, c.version}
	l.sumsMu.Lock()
	sum, ok := l.sums[key]
	l.sumsMu.Unlock()
	if !ok {
		var err error
		if sum, err = l.o.Checksum(ctx, service, c.version); err != nil {
			l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: checksum of a version not read, content not compared",
				slog.String("service", service), slog.Int64("version", c.version), slog.Any("err", err))
			return
		}
		l.sumsMu.Lock()
		l.sums[key] = sum
		l.sumsMu.Unlock()
	}
	c.published = sum
}

// ChecksumFrom adapts a rules store for LedgerOptions.Checksum: the
// checksum of the store's version, "" for a version it does not have.
func ChecksumFrom(r versioning.Reader) func(ctx context.Context, service string, version int64) (string, error) {
	return checksumFrom(r)
}

func checksumFrom(g versionGetter) func(ctx context.Context, service string, version int64) (string, error) {
	return func(ctx context.Context, service string, version int64) (string, error) {
		v, err := g.Get(ctx, service, version)
		if errors.Is(err, versioning.ErrNotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return v.Checksum, nil
	}
}
