package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
)

// SQL is the Store over database/sql for both dialects.
type SQL struct {
	db  *sql.DB
	d   migrations.Dialect
	log *slog.Logger
}

var _ Store = (*SQL)(nil)

// Options of Open. Zero fields take defaults.
type Options struct {
	Logger *slog.Logger
}

// OpenSQLite opens (creating if needed) and migrates an SQLite file;
// ":memory:" gives a private in-memory database.
func OpenSQLite(ctx context.Context, path string, o Options) (*SQL, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: sqlite: path is required", alerts.ErrInvalid)
	}
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w: sqlite: %w", alerts.ErrStore, err)
	}
	return New(ctx, db, migrations.SQLite, o)
}

// OpenPostgres connects to url and migrates the database.
func OpenPostgres(ctx context.Context, url string, o Options) (*SQL, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: url: %v", alerts.ErrInvalid, err)
	}
	return New(ctx, stdlib.OpenDB(*cfg), migrations.Postgres, o)
}

// New migrates db and returns the store; it owns db from then on.
func New(ctx context.Context, db *sql.DB, d migrations.Dialect, o Options) (*SQL, error) {
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w: %s: %w", alerts.ErrStore, d, err)
	}
	if err := migrations.Up(ctx, db, d, migrations.Options{Logger: o.Logger}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w: %w", alerts.ErrStore, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &SQL{db: db, d: d, log: log}, nil
}

// Close closes the database.
func (s *SQL) Close() error { return s.db.Close() }

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", alerts.ErrStore, op, err)
}

// The times whose Unix nanoseconds fit an int64 (1677-09-21 to 2262-04-11).
var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

// nanos is the column value of t: its Unix nanoseconds, 0 for the zero
// time. A time outside the int64 range is clamped to its end, so that the
// columns keep the order of the times: time.UnixNano wraps, and a silence
// "until 9999-12-31" would otherwise be stored as ended in the past and
// deleted at the next prune.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanosTime):
		return math.MinInt64
	case t.After(maxNanosTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (s *SQL) tx(ctx context.Context, op string, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return wrap(op, err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return wrap(op, err)
	}
	return wrap(op, tx.Commit())
}

// SaveStates implements Store. Concurrent calls are serialized, the last
// one's states win: on PostgreSQL the table is locked for writes first, as
// a DELETE does not see the rows another transaction inserted meanwhile
// and the INSERTs would then fail on their primary key (SQLite write
// transactions take the database's write lock at BEGIN).
func (s *SQL) SaveStates(ctx context.Context, states []rule.Active) error {
	return s.tx(ctx, "save states", func(tx *sql.Tx) error {
		if s.d == migrations.Postgres {
			if _, err := tx.ExecContext(ctx, `LOCK TABLE alert_states IN EXCLUSIVE MODE`); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_states`); err != nil {
			return err
		}
		for _, a := range states {
			b, err := json.Marshal(a)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO alert_states (fingerprint, rule, state, body, updated_at) VALUES ($1, $2, $3, $4, $5)`,
				a.Fingerprint().String(), a.Rule, a.State.String(), string(b), nanos(latest(a))); err != nil {
				return err
			}
		}
		return bump(ctx, tx, versionStates)
	})
}

// latest is the last time the state changed.
func latest(a rule.Active) time.Time {
	t := a.ActiveAt
	for _, u := range []time.Time{a.FiredAt, a.ResolvedAt, a.KeepFiringSince, a.LastEventAt} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// LoadStates implements Store.
func (s *SQL) LoadStates(ctx context.Context) ([]rule.Active, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM alert_states ORDER BY rule, fingerprint`)
	if err != nil {
		return nil, wrap("load states", err)
	}
	return collectJSON[rule.Active](rows, "load states")
}

func collectJSON[T any](rows *sql.Rows, op string) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, wrap(op, err)
		}
		var v T
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			return nil, wrap(op, err)
		}
		out = append(out, v)
	}
	return out, wrap(op, rows.Err())
}

// AppendHistory implements Store.
func (s *SQL) AppendHistory(ctx context.Context, ts []rule.Transition) error {
	if len(ts) == 0 {
		return nil
	}
	return s.tx(ctx, "append history", func(tx *sql.Tx) error {
		for _, t := range ts {
			l, err := json.Marshal(t.Labels)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO alert_history (fingerprint, rule, labels, from_state, to_state, at) VALUES ($1, $2, $3, $4, $5, $6)`,
				t.Fingerprint.String(), t.Rule, string(l), t.From.String(), t.To.String(), nanos(t.At)); err != nil {
				return err
			}
		}
		return nil
	})
}

// History implements Store.
func (s *SQL) History(ctx context.Context, fp alerts.Fingerprint, limit int) ([]HistoryEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT id, fingerprint, rule, labels, from_state, to_state, at FROM alert_history`
	args := []any{}
	if fp != 0 {
		q += ` WHERE fingerprint = $1 ORDER BY id DESC LIMIT $2`
		args = append(args, fp.String(), limit)
	} else {
		q += ` ORDER BY id DESC LIMIT $1`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, wrap("history", err)
	}
	defer rows.Close()
	var out []HistoryEntry
	for rows.Next() {
		var e HistoryEntry
		var fps, labels, from, to string
		var at int64
		if err := rows.Scan(&e.ID, &fps, &e.Rule, &labels, &from, &to, &at); err != nil {
			return nil, wrap("history", err)
		}
		var errs []error
		var err error
		e.Fingerprint, err = alerts.ParseFingerprint(fps)
		errs = append(errs, err, json.Unmarshal([]byte(labels), &e.Labels))
		e.From, err = alerts.ParseState(from)
		errs = append(errs, err)
		e.To, err = alerts.ParseState(to)
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return nil, wrap("history", err)
		}
		e.At = fromNanos(at)
		out = append([]HistoryEntry{e}, out...)
	}
	return out, wrap("history", rows.Err())
}

// PutSilence implements Store (insert or replace by ID).
func (s *SQL) PutSilence(ctx context.Context, sl silence.Silence) error {
	if sl.ID == "" {
		return fmt.Errorf("%w: silence: id must be set", alerts.ErrInvalid)
	}
	b, err := json.Marshal(sl)
	if err != nil {
		return wrap("put silence", err)
	}
	return s.tx(ctx, "put silence", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_silences (id, starts_at, ends_at, created_by, comment, body) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (id) DO UPDATE SET starts_at = excluded.starts_at, ends_at = excluded.ends_at, body = excluded.body`,
			sl.ID, nanos(sl.StartsAt), nanos(sl.EndsAt), sl.CreatedBy, sl.Comment, string(b)); err != nil {
			return err
		}
		return bump(ctx, tx, versionSilences)
	})
}

// ReplaceSilence implements Store. The silence stored and prev are compared
// as this version encodes them (silenceKey), so that a body stored by an
// older version compares by what it says, not by how it was written. On PostgreSQL the
// row is locked from the read to the write; SQLite write transactions take
// the database's write lock at BEGIN.
func (s *SQL) ReplaceSilence(ctx context.Context, prev, next silence.Silence) error {
	if next.ID == "" {
		return fmt.Errorf("%w: silence: id must be set", alerts.ErrInvalid)
	}
	if prev.ID != next.ID {
		return fmt.Errorf("%w: silence: id %q cannot replace silence %q", alerts.ErrInvalid, next.ID, prev.ID)
	}
	want, err := silenceKey(prev)
	if err != nil {
		return wrap("replace silence", err)
	}
	b, err := json.Marshal(next)
	if err != nil {
		return wrap("replace silence", err)
	}
	var conflict error
	changed := fmt.Errorf("%w: silence %q changed since it was read (edited or expired through another replica): read it again", alerts.ErrConflict, next.ID)
	err = s.tx(ctx, "replace silence", func(tx *sql.Tx) error {
		q := `SELECT body FROM alert_silences WHERE id = $1`
		if s.d == migrations.Postgres {
			q += ` FOR UPDATE`
		}
		var body string
		err := tx.QueryRowContext(ctx, q, next.ID).Scan(&body)
		if errors.Is(err, sql.ErrNoRows) {
			conflict = fmt.Errorf("%w: silence %q is no longer stored (pruned since it was read)", alerts.ErrConflict, next.ID)
			return nil
		}
		if err != nil {
			return err
		}
		var cur silence.Silence
		if json.Unmarshal([]byte(body), &cur) != nil {
			conflict = changed
			return nil
		}
		if got, err := silenceKey(cur); err != nil || string(got) != string(want) {
			conflict = changed
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_silences SET starts_at = $1, ends_at = $2, body = $3 WHERE id = $4`,
			nanos(next.StartsAt), nanos(next.EndsAt), string(b), next.ID); err != nil {
			return err
		}
		return bump(ctx, tx, versionSilences)
	})
	if err != nil {
		return err
	}
	return conflict
}

// silenceKey encodes sl with its times in UTC, so that two encodings are
// equal when the silences say the same, whatever the zones of their times.
func silenceKey(sl silence.Silence) ([]byte, error) {
	sl.StartsAt, sl.EndsAt, sl.CreatedAt, sl.UpdatedAt = sl.StartsAt.UTC(), sl.EndsAt.UTC(), sl.CreatedAt.UTC(), sl.UpdatedAt.UTC()
	return json.Marshal(sl)
}

// Silences implements Store.
func (s *SQL) Silences(ctx context.Context) ([]silence.Silence, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, body FROM alert_silences ORDER BY starts_at, id`)
	if err != nil {
		return nil, wrap("silences", err)
	}
	defer rows.Close()
	var out []silence.Silence
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			return nil, wrap("silences", err)
		}
		var sl silence.Silence
		if err := json.Unmarshal([]byte(body), &sl); err != nil {
			// Stored by a version that accepted what this one refuses (a
			// regex that escaped its anchors): one such silence must not
			// make every other unreadable, and the manager unable to start.
			s.log.Warn("alerts: stored silence ignored: it no longer parses; create it anew with valid matchers",
				"silence", id, "err", err)
			continue
		}
		out = append(out, sl)
	}
	return out, wrap("silences", rows.Err())
}

// PruneSilences implements Store.
func (s *SQL) PruneSilences(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, "prune silences", func(tx *sql.Tx) error {
		var err error
		n, err = deleted(tx.ExecContext(ctx, `DELETE FROM alert_silences WHERE ends_at < $1`, nanos(before)))
		if err != nil || n == 0 {
			return err
		}
		return bump(ctx, tx, versionSilences)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// deleted returns the rows a DELETE affected.
func deleted(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// PutAck implements Store.
func (s *SQL) PutAck(ctx context.Context, a alerts.Ack) error {
	if err := a.Validate(); err != nil {
		return err
	}
	return s.tx(ctx, "put ack", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_acks (fingerprint, starts_at, acked_by, comment, acked_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (fingerprint) DO UPDATE SET starts_at = excluded.starts_at, acked_by = excluded.acked_by, comment = excluded.comment, acked_at = excluded.acked_at`,
			a.Fingerprint.String(), nanos(a.StartsAt), a.By, a.Comment, nanos(a.At)); err != nil {
			return err
		}
		return bump(ctx, tx, versionAcks)
	})
}

// DeleteAck implements Store.
func (s *SQL) DeleteAck(ctx context.Context, fp alerts.Fingerprint) error {
	return s.tx(ctx, "delete ack", func(tx *sql.Tx) error {
		n, err := deleted(tx.ExecContext(ctx, `DELETE FROM alert_acks WHERE fingerprint = $1`, fp.String()))
		if err != nil || n == 0 {
			return err
		}
		return bump(ctx, tx, versionAcks)
	})
}

// Acks implements Store.
func (s *SQL) Acks(ctx context.Context) ([]alerts.Ack, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT fingerprint, starts_at, acked_by, comment, acked_at FROM alert_acks ORDER BY fingerprint`)
	if err != nil {
		return nil, wrap("acks", err)
	}
	defer rows.Close()
	var out []alerts.Ack
	for rows.Next() {
		var a alerts.Ack
		var fp string
		var starts, at int64
		if err := rows.Scan(&fp, &starts, &a.By, &a.Comment, &at); err != nil {
			return nil, wrap("acks", err)
		}
		f, err := alerts.ParseFingerprint(fp)
		if err != nil {
			return nil, wrap("acks", err)
		}
		a.Fingerprint, a.StartsAt, a.At = f, fromNanos(starts), fromNanos(at)
		out = append(out, a)
	}
	return out, wrap("acks", rows.Err())
}

// RecordNotification implements Store.
func (s *SQL) RecordNotification(ctx context.Context, g *dispatch.GroupState, m *notify.Message) (bool, error) {
	if m == nil || m.ID == "" {
		return false, fmt.Errorf("%w: notification: id must be set", alerts.ErrInvalid)
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return false, wrap("record notification", err)
	}
	inserted := false
	err = s.tx(ctx, "record notification", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO alert_notifications (id, receiver, group_key, kind, body, created_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (id) DO NOTHING`, m.ID, m.Receiver, m.GroupKey, string(m.Kind), string(mb), nanos(m.CreatedAt))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		inserted = n == 1
		if !inserted || g == nil {
			return nil
		}
		gb, err := json.Marshal(g)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO alert_groups (receiver, group_key, seq, body) VALUES ($1, $2, $3, $4)
			ON CONFLICT (receiver, group_key) DO UPDATE SET seq = excluded.seq, body = excluded.body`, g.Receiver, g.Key, g.Seq, string(gb))
		return err
	})
	return inserted, err
}

// Groups implements Store.
func (s *SQL) Groups(ctx context.Context) ([]dispatch.GroupState, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM alert_groups ORDER BY receiver, group_key`)
	if err != nil {
		return nil, wrap("groups", err)
	}
	return collectJSON[dispatch.GroupState](rows, "groups")
}

// UpdateGroups implements Store.
func (s *SQL) UpdateGroups(ctx context.Context, put []dispatch.GroupState, remove []dispatch.GroupRef) error {
	if len(put) == 0 && len(remove) == 0 {
		return nil
	}
	return s.tx(ctx, "update groups", func(tx *sql.Tx) error {
		for _, g := range put {
			gb, err := json.Marshal(g)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO alert_groups (receiver, group_key, seq, body) VALUES ($1, $2, $3, $4)
				ON CONFLICT (receiver, group_key) DO UPDATE SET seq = excluded.seq, body = excluded.body`, g.Receiver, g.Key, g.Seq, string(gb)); err != nil {
				return err
			}
		}
		for _, r := range remove {
			if _, err := tx.ExecContext(ctx, `DELETE FROM alert_groups WHERE receiver = $1 AND group_key = $2`, r.Receiver, r.Key); err != nil {
				return err
			}
		}
		return nil
	})
}

// MarkDelivered implements Store.
func (s *SQL) MarkDelivered(ctx context.Context, id string, at time.Time, attempts int, errText string) error {
	var delivered any
	if errText == "" {
		delivered = nanos(at)
	} else {
		// A notification given up after its last attempt is closed too,
		// so that a restart does not resend it forever.
		delivered = -nanos(at)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE alert_notifications SET delivered_at = $1, attempts = attempts + $2, last_error = $3 WHERE id = $4`,
		delivered, attempts, errText, id)
	if err != nil {
		return wrap("mark delivered", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: notification %q", alerts.ErrNotFound, id)
	}
	return nil
}

// Undelivered implements Store.
func (s *SQL) Undelivered(ctx context.Context) ([]Pending, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body, attempts, last_error FROM alert_notifications WHERE delivered_at IS NULL ORDER BY created_at, id`)
	if err != nil {
		return nil, wrap("undelivered", err)
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var body string
		var p Pending
		if err := rows.Scan(&body, &p.Attempts, &p.Error); err != nil {
			return nil, wrap("undelivered", err)
		}
		p.Message = &notify.Message{}
		if err := json.Unmarshal([]byte(body), p.Message); err != nil {
			return nil, wrap("undelivered", err)
		}
		out = append(out, p)
	}
	return out, wrap("undelivered", rows.Err())
}

// Delivered implements Store. A negative delivered_at marks a notification
// given up; it reports false.
func (s *SQL) Delivered(ctx context.Context, id string) (time.Time, bool, error) {
	var at sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT delivered_at FROM alert_notifications WHERE id = $1`, id).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, fmt.Errorf("%w: notification %q", alerts.ErrNotFound, id)
	}
	if err != nil {
		return time.Time{}, false, wrap("delivered", err)
	}
	if !at.Valid || at.Int64 <= 0 {
		return time.Time{}, false, nil
	}
	return fromNanos(at.Int64), true, nil
}

// Prune implements Store.
func (s *SQL) Prune(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, "prune", func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM alert_history WHERE at < $1`,
			`DELETE FROM alert_notifications WHERE delivered_at IS NOT NULL AND created_at < $1`,
		} {
			res, err := tx.ExecContext(ctx, q, nanos(before))
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	return n, err
}
