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
// History only grows: Rollback stores an earlier version's document, its
// own secrets included, as a new version; List and ListPage (a Before
// cursor) return versions newest first.
//
// Secrets in receivers (config.SecretField: PagerDuty routing keys and
// events URLs, Slack, webhook and Alertmanager URLs, which may carry
// tokens or credentials, SMTP passwords) are shown masked by Mask and
// Summarize; Unmask puts the saved secrets back where an edited document
// still holds their masks unchanged, for the same receiver sending to the
// same place.
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
	"unicode/utf8"

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

// List returns up to limit versions (default 50, at most 1000), newest
// first: ListPage with only a limit.
func (s *Store) List(ctx context.Context, limit int) ([]Version, error) {
	return s.ListPage(ctx, ListOptions{Limit: limit})
}

// ListOptions select a page of ListPage.
type ListOptions struct {
	// Limit is the most versions returned: default 50, at most 1000.
	Limit int
	// Before, when positive, returns only the versions numbered below it:
	// pass the last number of a page to get the page after it. 0 starts
	// at the newest version.
	Before int64
}

// ListPage returns a page of versions, newest first. A negative Before
// wraps alerts.ErrInvalid.
func (s *Store) ListPage(ctx context.Context, o ListOptions) ([]Version, error) {
	if o.Before < 0 {
		return nil, fmt.Errorf("%w: before: must not be negative, got %d", alerts.ErrInvalid, o.Before)
	}
	limit := o.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	query, args := "SELECT "+columns+" FROM alert_config_versions ORDER BY number DESC LIMIT ?", []any{limit}
	if o.Before > 0 {
		query = "SELECT " + columns + " FROM alert_config_versions WHERE number < ? ORDER BY number DESC LIMIT ?"
		args = []any{o.Before, limit}
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
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
	actor, err := checkRequest(&r)
	if err != nil {
		return Version{}, err
	}
	if err := checkDocument(r.Document); err != nil {
		return Version{}, err
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
	// The saved secrets may make the document longer than what was sent.
	if err := checkDocument(doc); err != nil {
		return Version{}, fmt.Errorf("%w (with the saved secrets its masks keep)", err)
	}
	if _, err := config.Parse([]byte(doc)); err != nil {
		return Version{}, err
	}
	return s.store(ctx, Version{Number: r.Base + 1, Document: doc, Author: r.Author, Comment: r.Comment}, actor, r.Base, 0)
}

// RollbackRequest asks for a new version holding the document of an
// earlier one.
type RollbackRequest struct {
	// To is the version whose document, secrets included, the new version
	// holds.
	To int64
	// Base is the newest version when the rollback was decided; if another
	// version was saved since, Rollback fails with ErrConflict.
	Base    int64
	Author  string
	Roles   []versioning.Role
	Comment string
}

// Rollback stores the document of version To, as it was saved (its own
// secrets, not Base's), as the new version Base+1: history only grows, and
// the audit entry's detail names the version restored ("rollback_of").
// The document is validated again (rules may have tightened since it was
// saved). Errors as Save's; To must be an existing version before Base.
func (s *Store) Rollback(ctx context.Context, r RollbackRequest) (Version, error) {
	req := SaveRequest{Base: r.Base, Author: r.Author, Roles: r.Roles, Comment: r.Comment}
	actor, err := checkRequest(&req)
	if err != nil {
		return Version{}, err
	}
	if r.To < 1 || r.To >= r.Base {
		return Version{}, fmt.Errorf("%w: to: version %d is not an earlier version than the base %d", alerts.ErrInvalid, r.To, r.Base)
	}
	old, err := s.Get(ctx, r.To)
	if err != nil {
		if errors.Is(err, alerts.ErrNotFound) {
			return Version{}, fmt.Errorf("%w: to: version %d does not exist", alerts.ErrInvalid, r.To)
		}
		return Version{}, err
	}
	if _, err := config.Parse([]byte(old.Document)); err != nil {
		return Version{}, fmt.Errorf("%w: to: version %d is no longer valid: %w", alerts.ErrInvalid, r.To, err)
	}
	return s.store(ctx, Version{Number: r.Base + 1, Document: old.Document, Author: req.Author, Comment: req.Comment}, actor, r.Base, r.To)
}

// checkRequest trims and checks the author, comment and base of r and
// returns the audit actor.
func checkRequest(r *SaveRequest) (versioning.Actor, error) {
	r.Author, r.Comment = strings.TrimSpace(r.Author), strings.TrimSpace(r.Comment)
	switch {
	case r.Author == "":
		return versioning.Actor{}, fmt.Errorf("%w: author: must not be empty", alerts.ErrInvalid)
	case len(r.Author) > MaxAuthorBytes:
		return versioning.Actor{}, fmt.Errorf("%w: author: longer than %d bytes", alerts.ErrInvalid, MaxAuthorBytes)
	case r.Comment == "":
		return versioning.Actor{}, fmt.Errorf("%w: comment: say why the alerting configuration changes", alerts.ErrInvalid)
	case len(r.Comment) > MaxCommentBytes:
		return versioning.Actor{}, fmt.Errorf("%w: comment: longer than %d bytes", alerts.ErrInvalid, MaxCommentBytes)
	case r.Base < 0:
		return versioning.Actor{}, fmt.Errorf("%w: base: must not be negative", alerts.ErrInvalid)
	}
	// PostgreSQL's text holds neither NUL bytes nor invalid UTF-8: refuse
	// them on every backend alike.
	if err := versioning.ValidateComment("comment", r.Comment); err != nil {
		return versioning.Actor{}, fmt.Errorf("%w: %w", alerts.ErrInvalid, err)
	}
	actor := versioning.Actor{Name: r.Author, Roles: r.Roles}
	if err := versioning.ValidateActor("author", actor); err != nil {
		return versioning.Actor{}, fmt.Errorf("%w: %w", alerts.ErrInvalid, err)
	}
	return actor, nil
}

// checkDocument bounds the document's size and refuses bytes PostgreSQL's
// text cannot hold, naming where.
func checkDocument(doc string) error {
	if len(doc) > MaxDocumentBytes {
		return fmt.Errorf("%w: document: %d bytes, larger than the %d allowed", alerts.ErrInvalid, len(doc), MaxDocumentBytes)
	}
	if !utf8.ValidString(doc) {
		i := 0
		for i < len(doc) {
			r, n := utf8.DecodeRuneInString(doc[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("%w: document: byte %d is not valid UTF-8", alerts.ErrInvalid, i)
	}
	if i := strings.IndexByte(doc, 0); i >= 0 {
		return fmt.Errorf("%w: document: byte %d is a NUL byte", alerts.ErrInvalid, i)
	}
	return nil
}

// store inserts v, numbered base+1, with its audit entry (rollbackOf, when
// positive, is the version whose document v restores) and announces it.
func (s *Store) store(ctx context.Context, v Version, actor versioning.Actor, base, rollbackOf int64) (Version, error) {
	v.CreatedAt = s.clk.Now().UTC()
	if err := s.insert(ctx, v, actor, rollbackOf); err != nil {
		// Another save took the number first (the check in the transaction
		// or, racing it, the primary key).
		if cerr := s.conflict(ctx, base); cerr != nil {
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
func (s *Store) insert(ctx context.Context, v Version, actor versioning.Actor, rollbackOf int64) error {
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
	fields := map[string]any{"version": v.Number, "comment": v.Comment}
	if rollbackOf > 0 {
		fields["rollback_of"] = rollbackOf
	}
	detail, err := json.Marshal(fields)
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
