package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
)

// PutEvents implements Store.
func (s *SQL) PutEvents(ctx context.Context, evs []rule.Event) error {
	if len(evs) == 0 {
		return nil
	}
	return s.tx(ctx, "put events", func(tx *sql.Tx) error {
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO alert_events (at, body) VALUES ($1, $2)`, nanos(ev.At), string(b)); err != nil {
				return err
			}
		}
		return nil
	})
}

// TakeEvents implements Store. One DELETE ... RETURNING takes the rows, so
// that two replicas taking at once (a lead changing hands) never both get
// one: PostgreSQL's second DELETE skips the rows the first deleted, and
// SQLite runs one write at a time.
func (s *SQL) TakeEvents(ctx context.Context, limit int) ([]rule.Event, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: take events: limit must be positive, got %d", alerts.ErrInvalid, limit)
	}
	rows, err := s.db.QueryContext(ctx, `DELETE FROM alert_events WHERE id IN
		(SELECT id FROM alert_events ORDER BY id LIMIT $1) RETURNING id, body`, limit)
	if err != nil {
		return nil, wrap("take events", err)
	}
	defer rows.Close()
	type row struct {
		id int64
		ev rule.Event
	}
	var got []row
	var bad int
	for rows.Next() {
		var r row
		var body string
		if err := rows.Scan(&r.id, &body); err != nil {
			return nil, wrap("take events", err)
		}
		// A row that does not decode is deleted all the same: kept, it
		// would be refused at every step.
		if err := json.Unmarshal([]byte(body), &r.ev); err != nil {
			bad++
			continue
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("take events", err)
	}
	if bad > 0 {
		s.log.Warn("alert events dropped: stored body does not decode", "dropped", bad)
	}
	slices.SortFunc(got, func(a, b row) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	out := make([]rule.Event, len(got))
	for i, r := range got {
		out[i] = r.ev
	}
	return out, nil
}
