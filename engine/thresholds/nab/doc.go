// Package nab runs streaming anomaly detectors over the Numenta Anomaly
// Benchmark (NAB) corpus layout and scores their output the way NAB does.
//
// Detection (Run) reads every DIR/<category>/<file>.csv (`timestamp,value`)
// once, in order, feeding each row to a fresh detector for that file, and
// writes OUT/<category>/<file>.csv with `timestamp,value,anomaly_score`. The
// detector never sees a row before it has scored the previous ones.
//
// Scoring (Score) implements NAB's rules: anomaly windows, the probationary
// period (the first 15% of each file, at most 750 rows, is not scored), the
// scaled sigmoid that rewards early detections inside a window and weights
// false positives by their distance after the previous window, the cost
// profiles (Standard, RewardLowFP, RewardLowFN), a single threshold swept over
// the whole corpus, and normalisation so that the null detector scores 0 and
// a perfect detector 100.
package nab

import "errors"

// Sentinel errors; returned errors wrap one of them.
var (
	// ErrFormat reports malformed CSV or label input.
	ErrFormat = errors.New("nab: bad format")
	// ErrInput reports inconsistent input to the scorer.
	ErrInput = errors.New("nab: bad input")
)
