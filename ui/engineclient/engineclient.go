// Package engineclient is the UI's model.Fleet when the web UI runs as its
// own process: it reads the decision engine's JSON API (GET /engine/api/v1/services
// /engine/api/v1/services/{service} and /engine/api/v1/ledger, see package governor.dev/governor/engine/api) over HTTP
// and keeps each service's load score trend (one point per engine
// evaluation). Unknown values stay unknown (nil), never zero; an engine that
// does not answer, or whose last evaluation is older than Options.MaxAge,
// is an error the overview shows as a banner, with the engine's own message
// (its {"error": ...} answer) when it gave one. The engine's API takes no
// credentials; user info in BaseURL (basic auth to a proxy before it) is
// sent but never repeated in an error. Answers are bounded
// (Options.MaxResponseBytes).
//
// Every request is bounded by Options.Timeout, whatever the http.Client.
// A request that times out costs its page the whole timeout; a page reads
// the engine several times (a service page three), so after a timeout the
// client does not ask a hung engine again for Options.HoldOff: requests
// fail at once with ErrEngine, saying when the engine last timed out, and
// the pages show what they could read without it. Other failures (refused
// connections, error statuses) are fast and are not held off; no request
// is retried.
package engineclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/ui/model"
)

// ErrEngine wraps every failure to read the engine.
var ErrEngine = errors.New("engineclient: engine unavailable")

// ErrStale (wrapping ErrEngine) reports an engine that answers but has not
// evaluated for longer than Options.MaxAge: its load scores are old.
var ErrStale = fmt.Errorf("%w: its last evaluation is too old", ErrEngine)

// errNotFound marks a 404 from the engine (a service it does not know).
var errNotFound = errors.New("not found")

// Options configure New.
type Options struct {
	// BaseURL of the engine, e.g. http://engine:9090; required.
	BaseURL string
	// Client defaults to one with a 5 s timeout.
	Client *http.Client
	// Timeout bounds every request, whatever Client's own timeout (a
	// caller's client may have none): a request it cuts counts as a
	// timeout of the engine (see HoldOff). Default DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds an answer of the engine; a larger one fails
	// saying so. Default DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// TrendLen is how many evaluations the trend keeps; default 60.
	TrendLen int
	// MaxAge is how old the engine's last evaluation may be before its
	// scores are not shown as current: Services fails with ErrStale (the
	// pages show a banner) rather than present old scores and overload
	// flags as live, for instance while the engine cannot read its
	// metrics. Default DefaultMaxAge; negative: never.
	MaxAge time.Duration
	// HoldOff is how long after a request to the engine timed out the
	// client fails requests at once instead of waiting for the timeout
	// again. Default DefaultHoldOff; negative: never hold off.
	HoldOff time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// DefaultTimeout is the default Options.Timeout.
const DefaultTimeout = 5 * time.Second

// DefaultMaxResponseBytes is the default Options.MaxResponseBytes.
const DefaultMaxResponseBytes = 64 << 20

// DefaultHoldOff is the default Options.HoldOff.
const DefaultHoldOff = 10 * time.Second

// DefaultMaxAge is the default Options.MaxAge: twelve of the engine's
// default 10 s evaluation intervals.
const DefaultMaxAge = 2 * time.Minute

// Client reads the engine.
type Client struct {
	o     Options
	base  *url.URL
	mu    sync.Mutex
	last  time.Time
	trend map[string][]model.Point
	// hung is when a request last timed out, and hungErr its error (both
	// under mu).
	hung    time.Time
	hungErr error
}

var (
	_ model.Fleet     = (*Client)(nil)
	_ model.Instances = (*Client)(nil)
	_ model.Details   = (*Client)(nil)
)

// New returns a Client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("engineclient: BaseURL %q must be an http(s) URL", redact(o.BaseURL, u, err))
	}
	if o.Timeout < 0 || o.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("engineclient: Timeout %s and MaxResponseBytes %d must not be negative", o.Timeout, o.MaxResponseBytes)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	if o.TrendLen <= 0 {
		o.TrendLen = 60
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.HoldOff == 0 {
		o.HoldOff = DefaultHoldOff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{o: o, base: u, trend: map[string][]model.Point{}}, nil
}

type value struct {
	Value *float64 `json:"value"`
}

type term struct {
	Term            string   `json:"term"`
	Input           value    `json:"input"`
	Normalized      *float64 `json:"normalized"`
	EffectiveWeight float64  `json:"effectiveWeight"`
	Contribution    float64  `json:"contribution"`
	Known           bool     `json:"known"`
}

type service struct {
	Service string `json:"service"`
	Score   *struct {
		At         time.Time `json:"at"`
		Value      *float64  `json:"value"`
		Known      bool      `json:"known"`
		Overloaded bool      `json:"overloaded"`
		Raw        struct {
			Terms []term `json:"terms"`
		} `json:"raw"`
	} `json:"score"`
	Instances map[string]int `json:"instances"`
}

// redact is a BaseURL fit for an error: without the password of its user
// info, or without anything when it does not parse.
func redact(raw string, u *url.URL, err error) string {
	if err != nil {
		if strings.Contains(raw, "@") {
			return "(unparsable URL with user info)"
		}
		return raw
	}
	return u.Redacted()
}

// engineError is the engine's error body, {"error": "..."}.
type engineError struct {
	Error string `json:"error"`
}

// message is what an error answer says: the engine's "error" field, or
// the start of the text of whatever answered (a proxy), on one line.
func message(b []byte) string {
	var e engineError
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "")), " ")
}

func (c *Client) get(ctx context.Context, path string, q url.Values, into any) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	u := c.base.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrEngine, err)
	}
	if err := c.heldOff(); err != nil {
		return err
	}
	resp, err := c.o.Client.Do(req)
	if err != nil {
		var ne net.Error
		if parent.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
			c.mu.Lock()
			c.hung, c.hungErr = c.o.Now(), err
			c.mu.Unlock()
		}
		return fmt.Errorf("%w: %w", ErrEngine, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("%w: %s: %s: %s", ErrEngine, path, resp.Status, message(b))
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w (%w)", err, errNotFound)
		}
		return err
	}
	lr := &io.LimitedReader{R: resp.Body, N: c.o.MaxResponseBytes + 1}
	if err := json.NewDecoder(lr).Decode(into); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("%w: %s: answer larger than %d bytes (MaxResponseBytes)", ErrEngine, path, c.o.MaxResponseBytes)
		}
		return fmt.Errorf("%w: %s: %w", ErrEngine, path, err)
	}
	return nil
}

// heldOff returns an error while a timeout of the engine is recent
// (Options.HoldOff).
func (c *Client) heldOff() error {
	if c.o.HoldOff < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hungErr == nil {
		return nil
	}
	now := c.o.Now()
	if since := now.Sub(c.hung); since >= 0 && since < c.o.HoldOff {
		return fmt.Errorf("%w: timed out at %s, not asked again for %s: %w", ErrEngine,
			c.hung.UTC().Format(time.RFC3339), (c.o.HoldOff - since).Round(time.Second), c.hungErr)
	}
	c.hungErr = nil
	return nil
}

// Services returns the engine's services by name.
func (c *Client) Services(ctx context.Context) ([]model.ServiceStatus, error) {
	var doc struct {
		Services []service `json:"services"`
		LastTick time.Time `json:"last_tick"`
		Problems []string  `json:"problems"`
	}
	if err := c.get(ctx, "/engine/api/v1/services", nil, &doc); err != nil {
		return nil, err
	}
	if age := c.o.Now().Sub(doc.LastTick); c.o.MaxAge > 0 && !doc.LastTick.IsZero() && age > c.o.MaxAge {
		return nil, fmt.Errorf("%w: at %s, %s ago", ErrStale, doc.LastTick.UTC().Format(time.RFC3339), age.Round(time.Second))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := doc.LastTick.After(c.last)
	if fresh {
		c.last = doc.LastTick
	}
	out := make([]model.ServiceStatus, 0, len(doc.Services))
	for _, s := range doc.Services {
		st := model.ServiceStatus{Name: s.Service}
		if sc := s.Score; sc != nil {
			st.Overloaded = sc.Overloaded
			if sc.Known && sc.Value != nil {
				v := *sc.Value
				st.LoadScore = &v
				if fresh {
					pts := append(c.trend[s.Service], model.Point{At: sc.At, Value: v})
					if len(pts) > c.o.TrendLen {
						pts = pts[len(pts)-c.o.TrendLen:]
					}
					c.trend[s.Service] = pts
				}
			}
			for _, t := range sc.Raw.Terms {
				if !t.Known || t.Normalized == nil {
					continue
				}
				st.Terms = append(st.Terms, model.Term{Name: t.Term, Value: *t.Normalized, Weight: t.EffectiveWeight, Contribution: t.Contribution})
				if t.Term == "latency" && t.Input.Value != nil {
					p := *t.Input.Value
					st.P99 = &p
				}
			}
		}
		st.Trend = slices.Clone(c.trend[s.Service])
		if s.Instances == nil {
			// The engine has no delivery ledger or could not read it.
			st.Rollout = model.Rollout{Unknown: true}
		} else {
			st.Rollout = model.Rollout{Synced: s.Instances["SYNCED"], Pending: s.Instances["PENDING"], Stale: s.Instances["STALE"],
				Nacked: s.Instances["NACKED"], Gone: s.Instances["GONE"], Unpublished: s.Instances["UNPUBLISHED"]}
		}
		out = append(out, st)
	}
	if len(doc.Problems) > 0 {
		// The services are good to show, with what could not be read.
		return out, fmt.Errorf("engine: %s", strings.Join(doc.Problems, "; "))
	}
	return out, nil
}

// Instances returns a service's instances from the engine's ledger.
func (c *Client) Instances(ctx context.Context, svc string) ([]model.Instance, error) {
	var doc struct {
		Instances []struct {
			Instance  string    `json:"instance"`
			Running   int64     `json:"running"`
			Target    int64     `json:"target"`
			State     string    `json:"state"`
			Since     time.Time `json:"since"`
			LastSeen  time.Time `json:"last_seen"`
			NackError string    `json:"nack_error"`
		} `json:"instances"`
	}
	if err := c.get(ctx, "/engine/api/v1/ledger", url.Values{"service": {svc}}, &doc); err != nil {
		return nil, err
	}
	out := make([]model.Instance, len(doc.Instances))
	for i, in := range doc.Instances {
		out[i] = model.Instance{Name: in.Instance, State: in.State, Running: in.Running, Target: in.Target, Since: in.Since, LastSeen: in.LastSeen, NackError: in.NackError}
	}
	return out, nil
}

// ServiceDetail reads a service's alert levels and its undeliverable
// versions from the engine's service detail. A service the engine does
// not know has neither.
func (c *Client) ServiceDetail(ctx context.Context, svc string) (model.ServiceDetail, error) {
	var doc struct {
		LatencyLevels *model.LatencyLevels `json:"latency_levels"`
		AlertLevels   []model.AlertLevel   `json:"alert_levels"`
		Undeliverable []struct {
			Service string    `json:"service"`
			Version int64     `json:"version"`
			Reason  string    `json:"reason"`
			Size    int       `json:"size"`
			Limit   int       `json:"limit"`
			Error   string    `json:"error"`
			At      time.Time `json:"at"`
		} `json:"undeliverable"`
	}
	err := c.get(ctx, "/engine/api/v1/services/"+url.PathEscape(svc), nil, &doc)
	if errors.Is(err, errNotFound) {
		return model.ServiceDetail{}, nil
	}
	if err != nil {
		return model.ServiceDetail{}, err
	}
	d := model.ServiceDetail{P99: doc.LatencyLevels, Levels: doc.AlertLevels}
	if lv := d.P99; lv != nil && !(lv.Warn > 0) {
		d.P99 = nil
	}
	for _, u := range doc.Undeliverable {
		d.Undeliverable = append(d.Undeliverable, model.Undeliverable{Service: u.Service, Version: u.Version, Reason: u.Reason,
			Size: u.Size, Limit: u.Limit, Error: u.Error, At: u.At})
	}
	return d, nil
}
