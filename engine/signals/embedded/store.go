package embedded

import (
	"context"
	"errors"

	"governor.dev/governor/engine/signals"
)

// Store is the embedded default in one piece: a DB and a Scraper writing
// into it. It answers queries as a signals.Source (through DB) and takes
// targets through SetTargets (through Scraper).
type Store struct {
	*DB
	*Scraper
}

var _ signals.PromQLSource = (*Store)(nil)

// NewStore opens a DB and makes a scraper for it. Run the scraper with Run;
// Close the store after Run has returned.
func NewStore(db Options, scrape ScraperOptions) (*Store, error) {
	d, err := Open(db)
	if err != nil {
		return nil, err
	}
	s, err := NewScraper(d, scrape)
	if err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return &Store{DB: d, Scraper: s}, nil
}

// Run scrapes until ctx is done.
func (s *Store) Run(ctx context.Context) error { return s.Scraper.Run(ctx) }

// Close closes the DB.
func (s *Store) Close() error { return s.DB.Close() }
