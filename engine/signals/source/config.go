package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

// MaxConfigBytes bounds a configuration document.
const MaxConfigBytes = 1 << 20

// Duration is a time.Duration written as a Go duration string ("15s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"15s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %s", strconv.Quote(s))
	}
	*d = Duration(v)
	return nil
}

// Config selects and configures the signal source and reader.
type Config struct {
	// Prometheus, when set, reads from a Prometheus-compatible query API
	// and Embedded must be empty.
	Prometheus *Prometheus `json:"prometheus,omitempty"`
	// Embedded configures the default embedded store.
	Embedded Embedded `json:"embedded"`
	// Window is the rate window of the signal queries. Default 1m. With the
	// embedded store it must cover at least two scrape intervals (better
	// four): a rate needs two samples in the window.
	Window Duration `json:"window,omitempty"`
	// MaxAge marks older entries stale. Default 2m.
	MaxAge Duration `json:"maxAge,omitempty"`
	// Templates override signal templates by name.
	Templates map[signals.Signal]string `json:"templates,omitempty"`
}

// Prometheus configures the HTTP API source.
type Prometheus struct {
	Address string   `json:"address"`
	Timeout Duration `json:"timeout,omitempty"`
	// Retries after a failed attempt; omitted means the client's default.
	Retries *int `json:"retries,omitempty"`
}

// Embedded configures the embedded store.
type Embedded struct {
	Targets   []embedded.Target `json:"targets,omitempty"`
	Interval  Duration          `json:"interval,omitempty"`
	Timeout   Duration          `json:"timeout,omitempty"`
	Retention Duration          `json:"retention,omitempty"`
}

func (e Embedded) empty() bool {
	return len(e.Targets) == 0 && e.Interval == 0 && e.Timeout == 0 && e.Retention == 0
}

// Decode parses and validates a JSON configuration.
func Decode(data []byte) (Config, error) {
	var c Config
	if len(data) > MaxConfigBytes {
		return c, fmt.Errorf("%w: config is %d bytes, at most %d allowed", signals.ErrInvalidOption, len(data), MaxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: config: %v", signals.ErrInvalidOption, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: config: trailing data after the object", signals.ErrInvalidOption)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks the whole configuration, naming the first bad field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", signals.ErrInvalidOption, field, fmt.Sprintf(format, args...))
	}
	for _, d := range []struct {
		field string
		v     Duration
	}{
		{"window", c.Window}, {"maxAge", c.MaxAge},
		{"embedded.interval", c.Embedded.Interval}, {"embedded.timeout", c.Embedded.Timeout},
		{"embedded.retention", c.Embedded.Retention},
	} {
		if d.v < 0 {
			return bad(d.field, "must not be negative, got %s", time.Duration(d.v))
		}
	}
	if c.Prometheus == nil {
		// The scraper's interval and the reader's window as they will be,
		// defaults included.
		interval := time.Duration(c.Embedded.Interval)
		if interval == 0 {
			interval = embedded.DefaultScraperOptions().Interval
		}
		if c.Embedded.Timeout > Duration(interval) {
			return bad("embedded.timeout", "%s exceeds the interval %s", time.Duration(c.Embedded.Timeout), interval)
		}
		window := time.Duration(c.Window)
		if window == 0 {
			window = signals.DefaultReaderOptions().Window
		}
		if window < 2*interval {
			return bad("window", "%s is shorter than two scrape intervals of %s: rate() needs two samples in every window", window, interval)
		}
	}
	if p := c.Prometheus; p != nil {
		if !c.Embedded.empty() {
			return bad("embedded", "must be empty when prometheus is set")
		}
		if p.Address == "" {
			return bad("prometheus.address", "required")
		}
		if p.Timeout < 0 {
			return bad("prometheus.timeout", "must not be negative, got %s", time.Duration(p.Timeout))
		}
		if p.Retries != nil && *p.Retries < 0 {
			return bad("prometheus.retries", "must not be negative, got %d", *p.Retries)
		}
	}
	if err := embedded.ValidateTargets("embedded.targets", c.Embedded.Targets); err != nil {
		return err
	}
	if err := signals.CheckTemplates(c.Templates); err != nil {
		return err
	}
	return nil
}
