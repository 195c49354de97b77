package store

import (
	"context"
	"database/sql"
	"fmt"
)

// The names of the alert_shared_version rows (migration 00103).
const (
	versionSilences = "silences"
	versionAcks     = "acks"
	versionStates   = "states"
)

// bump adds one to the write counter name in tx, the transaction of the
// write. The row is written last in every transaction, after the rows of
// its table, so that on PostgreSQL two writers never wait on each other
// in opposite orders. A row missing (deleted by hand) fails no write:
// SharedVersions then fails, and its readers read every table.
func bump(ctx context.Context, tx *sql.Tx, name string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE alert_shared_version SET version = version + 1 WHERE name = $1`, name); err != nil {
		return fmt.Errorf("shared version %s: %w", name, err)
	}
	return nil
}

// SharedVersions implements Store.
func (s *SQL) SharedVersions(ctx context.Context) (SharedVersions, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, version FROM alert_shared_version`)
	if err != nil {
		return SharedVersions{}, wrap("shared versions", err)
	}
	defer rows.Close()
	var v SharedVersions
	seen := 0
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return SharedVersions{}, wrap("shared versions", err)
		}
		switch name {
		case versionSilences:
			v.Silences = n
		case versionAcks:
			v.Acks = n
		case versionStates:
			v.States = n
		default:
			continue
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		return SharedVersions{}, wrap("shared versions", err)
	}
	if seen != 3 {
		return SharedVersions{}, wrap("shared versions", fmt.Errorf("%d of the 3 rows stored", seen))
	}
	return v, nil
}
