// Package thresholds detects anomalies in metric streams and recommends
// thresholds from what it has learnt, in constant memory and time per sample.
//
// # Detector
//
// A Detector follows one series. Observe takes each sample's timestamp and
// value (time is passed in, never read from a clock) and returns a Result:
// an anomaly score in [0, 1], the expected value and spread, the feature that
// drove the score, and whether the detector has seen enough data to say
// anything: for the first Options.Warmup samples the result is Inconclusive
// and the score 0.
//
// Per sample the detector keeps
//   - a robust recent level and spread (EWMA of the value and of the absolute
//     deviation, each sample's influence clipped to Clip spreads), and a
//     robust long-run level;
//   - seasonal profiles (daily and weekly by default: one robust level per
//     5-minute phase of the day and per 30-minute phase of the week), the
//     best of them used instead of the recent level when it explains the data
//     markedly better, so daily and weekly cycles are expected rather than
//     alarming;
//   - fast and medium averages compared with the long-run level (level shifts
//     and drifts, a CUSUM-like change signal without a fixed threshold), and
//     a slowly shrinking envelope of past extremes (new highs and lows);
//   - the recent mean absolute change between samples against its long-run
//     level (a series that turns restless, or still, without moving its
//     level).
//
// From these it derives non-negative features (see Feature). Each feature's
// rarity is judged against the series' own history: an exponentially decayed
// histogram over log-spaced bins gives the surprisal -ln P(F >= f) of the
// current value, so a deviation that recurs (a nightly batch spike) stops
// being surprising while one not seen within the memory half-life is, and one
// beyond anything ever seen is most surprising. The score is the largest
// weighted surprisal s mapped to s/(s+ScoreScale). Scores are therefore
// comparable across series of any scale and need one threshold, not one per
// series: with the defaults, about 0.84 means "not seen within recent memory"
// and higher means "beyond anything seen". An event is reported once: a
// near-unseen surprisal within Options.EchoWindow samples of another keeps
// only part of itself, so the aftershocks of an event rank below fresh ones.
// Weak evidence keeps 1-LoneDamping of itself: a lone slow signal (a drift
// or a new high that no other feature corroborates, see
// Options.Corroborate), or a feature below its Options.MinValue (a point
// residual of a few spreads, a new high by a hair of the envelope's width, a
// small level shift or rise in volatility). So at the top of the score
// range, events that several views of the series agree on, or that lie
// clearly beyond the expected value or the past extremes, rank above it.
//
// Everything is O(1) per sample (the histograms are Fenwick trees over a fixed
// number of bins) and allocation-free; BenchmarkObserve measures it.
//
// # Evaluation
//
// DefaultOptions was tuned, as one parameter set for all files, on the NAB
// subset in shared/datasets/nab; the nab subpackage runs the detector over it
// and scores the output with NAB's rules (TestNABEvaluation there). The
// standard-profile score is 72.61 (29 of 36 windows, 19 false positives;
// Numenta HTM 72.3, CAD OSE 71.6, ARTime 69.8 on the same files).
// TestNABRobustness here checks that it does not hinge on one lucky setting:
// over 43 perturbations (the rarity bin edges moved by -0.2 to +0.4 of a bin,
// each continuous option x0.8 and x1.25, MinValue by feature family,
// EchoWindow -2 and +3) the score ranges 69.79 to 74.73, mean 72.48; the
// lowest come from Clip and ShortHalfLife.
//
// # Recommendations
//
// A Recommender learns a service's healthy baselines from per-interval
// signals (throughput, error ratio, p50/p99 latency), skipping intervals with
// errors above the health limit or anomalous latency (the detector's score),
// and intervals whose p99 or error ratio is above the warn level of its
// healthy baseline, so a lasting incident below the critical level or the
// health limit is not learnt as healthy (the detector adapts to it within
// minutes); a level lasting MinSamples consecutive intervals is learnt as
// the new normal. It recommends a
// breaker slow-call threshold from the baseline p99, a rate ceiling from the
// healthy peak throughput (a high quantile, not the maximum) plus headroom, and
// latency and error-ratio alert levels (the healthy median plus WarnSpreads
// and CriticalSpreads robust spreads of the healthy series). Until it has
// seen MinSamples healthy intervals its answer is Inconclusive. Latency,
// throughput and error-ratio distributions are kept in a Sketch: a quantile
// sketch with bounded relative error and time decay.
//
// # State
//
// Detector, Sketch and Recommender encode what they learned with
// MarshalBinary and restore it with UnmarshalBinary, so another process
// (a new engine leader) continues exactly where one stopped: a restored
// detector scores every later sample as the original would. The bytes
// carry a format version and a fingerprint of the options. Versions 1 to
// StateVersion are read (a version 1 recommender state restores with no
// interval counted above the error-ratio warn level); state of a newer
// version, saved under other options (other seasons, another sketch
// accuracy), truncated or corrupt is refused with an error wrapping
// ErrState, and the receiver keeps its state. Detector and Sketch states
// are still written as version 1, which earlier releases read; a
// Recommender state is written as version 2, which they refuse. Zeros are stored
// sparsely: a detector under DefaultOptions takes a few KiB once its
// profiles fill (TestDetectorStateRoundTrip logs the size).
package thresholds

import "errors"

// ErrOptions reports invalid options; returned errors wrap it and name the field.
var ErrOptions = errors.New("thresholds: invalid options")
