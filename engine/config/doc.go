// Package config is the engine's configuration: a YAML file, then
// environment variables (GOVERNOR_*), then command-line flags, each layer
// overriding the one before, validated as a whole at start. Validate reports
// every problem at once, each naming its field, so `engine -check-config`
// shows a broken file's mistakes in one run.
//
// Dev mode (`-dev`, used by `make run`) changes the defaults for a demo that
// shows something within a minute: embedded NATS, SQLite and metrics store,
// the demo fleet, second-scale intervals and short guardrail windows.
package config
