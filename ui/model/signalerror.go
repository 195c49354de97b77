package model

import "strings"

// SignalProblem is one golden signal the metrics source answered only in
// part, or not at all, while the rest of its read answered.
type SignalProblem struct {
	// Signal names the signal ("request_rate", "latency_p99", ...).
	Signal string
	// Failed is set when the signal's query failed; otherwise the source
	// answered with a warning that data may be missing (a store of a
	// federated query that did not answer), so the values may be unknown
	// or incomplete.
	Failed bool
	// Reason is why: the query failure or the source's warning.
	Reason string
}

// String is the overview's problem: "metrics partial: <signal>: <warning>"
// or "metrics query failed: <signal>: <reason>".
func (p SignalProblem) String() string {
	if p.Failed {
		return "metrics query failed: " + p.Signal + ": " + p.Reason
	}
	return "metrics partial: " + p.Signal + ": " + p.Reason
}

// SignalError is what a Fleet returns with its services when some of their
// signals are partial or failed. Build then names each signal as a problem
// of its own, and Err (the fleet's own failure, nil if none) as "metrics
// unavailable": an SRE tells "no data" from "the metrics store did not
// fully answer".
type SignalError struct {
	Err     error
	Signals []SignalProblem
}

func (e *SignalError) Error() string {
	parts := make([]string, 0, len(e.Signals)+1)
	if e.Err != nil {
		parts = append(parts, e.Err.Error())
	}
	for _, p := range e.Signals {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns Err.
func (e *SignalError) Unwrap() error { return e.Err }
