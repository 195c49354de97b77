// Package demo is the demo fleet of `engine -dev`: three services protected by
// the Governor SDK, each with a few instances that follow their rules through
// a watch.Watcher, serve real HTTP on loopback, expose the SDK's metrics, and
// receive open-loop traffic with recurring incidents (a spike, a slow
// downstream, a capacity drop), so the engine has something to govern.
//
// Each instance simulates a backend of fixed capacity under processor
// sharing: beyond capacity every request in progress slows down in
// proportion, as a real overloaded service does. Requests slower than the
// error latency fail with HTTP 500, so overload shows up in the error ratio as
// well as in latency. A slow downstream or a capacity drop holds for any
// load, the fleet's own or another tool's; a spike exists only in the
// fleet's own traffic (Options.Traffic), and Phase reports it only then.
package demo
