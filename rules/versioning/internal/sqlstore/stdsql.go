package sqlstore

import (
	"context"
	"database/sql"
)

// Querier is what *sql.DB and *sql.Tx have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// StdTx runs the store's statements ($1 placeholders) on a database/sql
// handle, a *sql.DB or a *sql.Tx: the SQLite store's adapter, and
// package sqlaudit's for a caller's transaction.
func StdTx(q Querier) Tx { return stdTx{q} }

type stdTx struct{ q Querier }

func (a stdTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := a.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (a stdTx) QueryRow(ctx context.Context, query string, args ...any) Row {
	return a.q.QueryRowContext(ctx, query, args...)
}

func (a stdTx) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := a.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return stdRows{rows}, nil
}

type stdRows struct{ *sql.Rows }

func (r stdRows) Close() { _ = r.Rows.Close() }
