package embedded

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/signals"
)

// DefaultJob is the job label of a target that names none.
const DefaultJob = "governor"

// Target is one endpoint to scrape.
type Target struct {
	// URL is the full metrics URL, e.g. http://10.0.0.7:8080/metrics.
	URL string `json:"url"`
	// Job is the job label. Default DefaultJob.
	Job string `json:"job,omitempty"`
	// Labels are extra target labels attached to every scraped series. The
	// instance label defaults to the URL's host:port and may be overridden
	// here; job may not (use Job).
	Labels map[string]string `json:"labels,omitempty"`
}

// targetLabels validates t and returns its target labels (job, instance and
// the extra labels).
func (t Target) targetLabels() (labels.Labels, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return labels.EmptyLabels(), fmt.Errorf("url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return labels.EmptyLabels(), fmt.Errorf("url: scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return labels.EmptyLabels(), fmt.Errorf("url: missing host in %q", t.URL)
	}
	job := t.Job
	if job == "" {
		job = DefaultJob
	}
	if !utf8.ValidString(job) {
		return labels.EmptyLabels(), fmt.Errorf("job: not valid UTF-8")
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	b.Set(model.JobLabel, job)
	b.Set(model.InstanceLabel, u.Host)
	for _, name := range slices.Sorted(maps.Keys(t.Labels)) {
		v := t.Labels[name]
		switch {
		case name == model.JobLabel:
			return labels.EmptyLabels(), fmt.Errorf("labels.job: set the job with the job field")
		case strings.HasPrefix(name, "__"):
			return labels.EmptyLabels(), fmt.Errorf("labels.%s: names starting with __ are reserved", name)
		case !model.UTF8Validation.IsValidLabelName(name):
			return labels.EmptyLabels(), fmt.Errorf("labels.%s: invalid label name", name)
		case v == "" || !utf8.ValidString(v):
			return labels.EmptyLabels(), fmt.Errorf("labels.%s: value must be non-empty valid UTF-8", name)
		}
		b.Set(name, v)
	}
	return b.Labels(), nil
}

// ValidateTargets checks a target set as SetTargets would, naming the first
// bad field under the given field name (SetTargets uses "targets").
func ValidateTargets(field string, ts []Target) error {
	_, err := validateTargets(field, ts)
	return err
}

// validateTargets checks a whole target set and returns each target's labels
// keyed by its identity. It refuses the set on the first bad target.
func validateTargets(field string, ts []Target) (map[string]labels.Labels, error) {
	out := make(map[string]labels.Labels, len(ts))
	for i, t := range ts {
		ls, err := t.targetLabels()
		if err != nil {
			return nil, fmt.Errorf("%w: %s[%d].%v", signals.ErrInvalidOption, field, i, err)
		}
		k := t.URL + ls.String()
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: %s[%d]: duplicate of an earlier target %s", signals.ErrInvalidOption, field, i, t.URL)
		}
		out[k] = ls
	}
	return out, nil
}

// Health is a target's scrape health, as in Prometheus.
type Health string

// Target health values.
const (
	HealthUnknown Health = "unknown"
	HealthUp      Health = "up"
	HealthDown    Health = "down"
)

// TargetStatus is what the scraper knows about one target.
type TargetStatus struct {
	URL string `json:"url"`
	// Labels are the target labels (job, instance and extra labels).
	Labels map[string]string `json:"labels"`
	Health Health            `json:"health"`
	// LastError is the error of the last scrape, empty when it succeeded.
	LastError string `json:"lastError"`
	// LastScrape is the start of the last scrape; zero before the first.
	LastScrape time.Time `json:"lastScrape"`
	// LastDuration is how long the last scrape took.
	LastDuration time.Duration `json:"lastDuration"`
	// Samples is the number of samples the last scrape stored.
	Samples int `json:"samples"`
	// Dropped is the number of samples the last scrape could not store
	// (duplicates, out of order, invalid labels, new series over the DB's
	// series limit).
	Dropped int `json:"dropped"`
}
