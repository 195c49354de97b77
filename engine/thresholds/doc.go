// Package thresholds detects anomalies in metric streams and recommends
// thresholds from what it has learnt, in constant memory and time per sample.
//
// A Detector follows one series. Each call to Observe passes the sample's
// timestamp and value (time is never read from a clock) and returns a Result
// with an anomaly score in [0, 1], the expected value and spread, and whether
// the detector has seen enough data to say anything: until then the result is
// Inconclusive and the score 0.
package thresholds

import "errors"

// ErrOptions reports invalid Options; returned errors wrap it and name the field.
var ErrOptions = errors.New("thresholds: invalid options")
