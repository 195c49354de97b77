// Package evaluate runs one evaluation cycle of the decision engine: read the
// fleet's signals at the tick time, update the load scores, ask the
// recommender for every service, submit what it recommends (inside the
// service's band it applies itself) and let the guardrail judge the versions
// that went live. The cycle takes its time as an argument, so the same code
// runs live, in tests with a fake clock and in a backtest over recorded
// metrics.
package evaluate
