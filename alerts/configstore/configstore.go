// Package configstore keeps the versions of the alerting document
// (alerts/config: rules, routes, timing, inhibition, receivers) that admins
// save in the web UI, in the rules database (migrations 00101). Every save
// is validated whole by config.Parse and refused with the field named;
// versions are numbered, immutable and carry who saved them, when and why.
// Each save records an AuditAction entry in the rule store's hash-chained
// audit log in the same transaction (rules/versioning/sqlaudit): a version
// is never stored without its entry, nor an entry without its version.
//
// Precedence: the newest saved version is the alerting configuration in
// force. The engine's configuration file (alerts.config_file, or
// GOVERNOR_ALERTS_CONFIG) is only the bootstrap: it applies while nothing
// has been saved. A running engine polls the store and swaps to a newly
// saved version without a restart (engine/app, alerts/manager.Reconfigure).
//
// Secrets in receivers (PagerDuty routing keys, Slack and webhook URLs,
// which carry their tokens, SMTP passwords) are shown masked by Mask; Unmask
// puts the saved secrets back where an edited document still holds a mask.
package configstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlaudit"
	"governor.dev/governor/sdk/clock"
)

// AuditAction is the audit action of a saved version; the entry's version
// is the version number, its detail {"version": n, "comment": "..."}.
const AuditAction versioning.Action = "alert_config"

// ErrConflict: another version was saved since the one the edit started from.
var ErrConflict = errors.New("alerts: config: conflict")

// Limits on input.
const (
	MaxDocumentBytes = 1 << 20
	MaxCommentBytes  = 4 << 10
	MaxAuthorBytes   = 128
)

// Version is one saved alerting document.
type Version struct {
	Number int64 `json:"number"`
	// Document is the JSON text as saved (secrets included: mask it
	// before showing it).
	Document  string    `json:"document"`
	Author    string    `json:"author"`
	Comment   string    `json:"comment,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Config parses the document (it was valid when saved).
func (v Version) Config() (*config.Config, error) { return config.Parse([]byte(v.Document)) }

// SaveRequest asks for a new version.
type SaveRequest struct {
	// Document is the alerting document; masked secrets (see Mask) keep the
	// values of Base.
	Document string
	// Base is the version the edit started from (0: none saved yet). If
	// another version was saved since, Save fails with ErrConflict.
	Base int64
	// Author names who saves (a user name, as the audit log's actors);
	// Roles are the author's roles, recorded in the audit entry.
	Author  string
	Roles   []versioning.Role
	Comment string
}

// Options of New.
type Options struct {
	Clock  clock.Clock
	Logger *slog.Logger
}

// Store keeps the versions. It is safe for concurrent use.
type Store struct {
	db    *sql.DB
	d     migrations.Dialect
	clk   clock.Clock
	saved chan struct{}
}

// New migrates db (shared with the other stores; not closed by Store).
func New(ctx context.Context, db *sql.DB, d migrations.Dialect, o Options) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: configstore: db is required", alerts.ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if err := migrations.Up(ctx, db, d, migrations.Options{Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("%w: configstore: %w", alerts.ErrStore, err)
	}
	return &Store{db: db, d: d, clk: o.Clock, saved: make(chan struct{}, 1)}, nil
}

// Saved receives a value (coalesced, never blocking Save) after a Save of
// this Store commits, so an engine in the same process applies the new
// version at once instead of at its next poll. Other processes poll.
func (s *Store) Saved() <-chan struct{} { return s.saved }

func (s *Store) q(query string) string {
	if s.d != migrations.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: config versions: %s: %w", alerts.ErrStore, op, err)
}

const columns = "number, document, author, comment, created_at"

func scan(row interface{ Scan(...any) error }) (Version, error) {
	var v Version
	var at int64
	if err := row.Scan(&v.Number, &v.Document, &v.Author, &v.Comment, &at); err != nil {
		return Version{}, err
	}
	v.CreatedAt = time.Unix(0, at).UTC()
	return v, nil
}

// Latest returns the newest version; alerts.ErrNotFound when none was saved.
func (s *Store) Latest(ctx context.Context) (Version, error) {
	v, err := scan(s.db.QueryRowContext(ctx, "SELECT "+columns+" FROM alert_config_versions ORDER BY number DESC LIMIT 1"))
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, fmt.Errorf("%w: no alerting configuration was saved", alerts.ErrNotFound)
	}
	return v, wrap("latest", err)
}

// Get returns version n; alerts.ErrNotFound if it does not exist.
func (s *Store) Get(ctx context.Context, n int64) (Version, error) {
	v, err := scan(s.db.QueryRowContext(ctx, s.q("SELECT "+columns+" FROM alert_config_versions WHERE number = ?"), n))
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, fmt.Errorf("%w: alerting configuration version %d", alerts.ErrNotFound, n)
	}
	return v, wrap("get", err)
}

// List returns up to limit versions (default 50, at most 1000), newest first.
func (s *Store) List(ctx context.Context, limit int) ([]Version, error) {
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	rows, err := s.db.QueryContext(ctx, s.q("SELECT "+columns+" FROM alert_config_versions ORDER BY number DESC LIMIT ?"), limit)
	if err != nil {
		return nil, wrap("list", err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, wrap("list", err)
		}
		out = append(out, v)
	}
	return out, wrap("list", rows.Err())
}

// Save validates the document (after putting back the secrets of Base where
// it holds masks) and stores it as version Base+1. Refused input wraps
// alerts.ErrInvalid and names the field; ErrConflict when Base is not the
// newest version any more. Nothing is stored on any error.
func (s *Store) Save(ctx context.Context, r SaveRequest) (Version, error) {
	r.Author, r.Comment = strings.TrimSpace(r.Author), strings.TrimSpace(r.Comment)
	switch {
	case r.Author == "":
		return Version{}, fmt.Errorf("%w: author: must not be empty", alerts.ErrInvalid)
	case len(r.Author) > MaxAuthorBytes:
		return Version{}, fmt.Errorf("%w: author: longer than %d bytes", alerts.ErrInvalid, MaxAuthorBytes)
	case r.Comment == "":
		return Version{}, fmt.Errorf("%w: comment: say why the alerting configuration changes", alerts.ErrInvalid)
	case len(r.Comment) > MaxCommentBytes:
		return Version{}, fmt.Errorf("%w: comment: longer than %d bytes", alerts.ErrInvalid, MaxCommentBytes)
	case len(r.Document) > MaxDocumentBytes:
		return Version{}, fmt.Errorf("%w: document: larger than %d bytes", alerts.ErrInvalid, MaxDocumentBytes)
	case r.Base < 0:
		return Version{}, fmt.Errorf("%w: base: must not be negative", alerts.ErrInvalid)
	}
	actor := versioning.Actor{Name: r.Author, Roles: r.Roles}
	if err := versioning.ValidateActor("author", actor); err != nil {
		return Version{}, fmt.Errorf("%w: %w", alerts.ErrInvalid, err)
	}
	var base string
	if r.Base > 0 {
		bv, err := s.Get(ctx, r.Base)
		if err != nil {
			if errors.Is(err, alerts.ErrNotFound) {
				return Version{}, fmt.Errorf("%w: base: version %d does not exist", alerts.ErrInvalid, r.Base)
			}
			return Version{}, err
		}
		base = bv.Document
	}
	doc, err := Unmask(r.Document, base)
	if err != nil {
		return Version{}, err
	}
	if _, err := config.Parse([]byte(doc)); err != nil {
		return Version{}, err
	}
	v := Version{Number: r.Base + 1, Document: doc, Author: r.Author, Comment: r.Comment, CreatedAt: s.clk.Now().UTC()}
	if err := s.insert(ctx, v, actor); err != nil {
		// Another save took the number first (the check in the transaction
		// or, racing it, the primary key).
		if cerr := s.conflict(ctx, r.Base); cerr != nil {
			return Version{}, cerr
		}
		return Version{}, wrap("save", err)
	}
	select {
	case s.saved <- struct{}{}:
	default:
	}
	return v, nil
}

var errStale = errors.New("stale base")

// insert stores v if the newest version is v.Number-1, and its audit
// entry by actor, in one transaction.
func (s *Store) insert(ctx context.Context, v Version, actor versioning.Actor) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if s.d == migrations.SQLite {
		// Take the write lock before reading: a deferred transaction that
		// read first fails (SQLITE_BUSY) to upgrade if another connection
		// wrote meanwhile, the rule store appending to the audit chain, say.
		if _, err := tx.ExecContext(ctx, "UPDATE rule_audit_head SET seq = seq WHERE id = 1"); err != nil {
			return err
		}
	}
	var latest sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT max(number) FROM alert_config_versions").Scan(&latest); err != nil {
		return err
	}
	if latest.Int64 != v.Number-1 {
		return errStale
	}
	if _, err := tx.ExecContext(ctx, s.q("INSERT INTO alert_config_versions ("+columns+") VALUES (?, ?, ?, ?, ?)"),
		v.Number, v.Document, v.Author, v.Comment, v.CreatedAt.UnixNano()); err != nil {
		return err
	}
	detail, err := json.Marshal(map[string]any{"version": v.Number, "comment": v.Comment})
	if err != nil {
		return err
	}
	if _, err := sqlaudit.Record(ctx, tx, s.d, v.CreatedAt, versioning.AuditRecord{Actor: actor, Action: AuditAction,
		Version: v.Number, Detail: detail}); err != nil {
		return fmt.Errorf("audit entry: %w", err)
	}
	return tx.Commit()
}

// conflict describes the version saved since base.
func (s *Store) conflict(ctx context.Context, base int64) error {
	l, err := s.Latest(ctx)
	if errors.Is(err, alerts.ErrNotFound) || (err == nil && l.Number == base) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: version %d was saved by %s at %s since the version %d this edit started from; reload and edit again",
		ErrConflict, l.Number, l.Author, l.CreatedAt.Format(time.RFC3339), base)
}
