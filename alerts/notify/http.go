package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one HTTP delivery attempt.
const DefaultTimeout = 10 * time.Second

// MaxRetryAfter bounds the wait a receiver may ask for with Retry-After: a
// longer one is cut to it, so that one bad header does not hold the
// receiver's queue for hours.
const MaxRetryAfter = 5 * time.Minute

// StatusError is a delivery the receiver refused with an HTTP status. It
// wraps ErrDelivery.
type StatusError struct {
	StatusCode int
	// RetryAfter is the delay the receiver asked for with Retry-After on a
	// 429 or 503 response, in seconds or as an HTTP date measured against
	// the response's Date; RetryAt is the HTTP date instead when the
	// response had no Date. Both are zero without Retry-After.
	RetryAfter time.Duration
	RetryAt    time.Time
	err        error
}

func (e *StatusError) Error() string { return e.Unwrap().Error() }

// Unwrap returns the error wrapping ErrDelivery (ErrDelivery itself with a
// status for a StatusError made outside PostJSON).
func (e *StatusError) Unwrap() error {
	if e.err == nil {
		return fmt.Errorf("%w: status %d", ErrDelivery, e.StatusCode)
	}
	return e.err
}

// Wait returns how long after now the receiver asked to be retried: 0
// without Retry-After or when that time has passed, at most MaxRetryAfter.
func (e *StatusError) Wait(now time.Time) time.Duration {
	d := e.RetryAfter
	if !e.RetryAt.IsZero() {
		d = e.RetryAt.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// parseRetryAfter reads the Retry-After header of a response (RFC 9110 10.2.3):
// delay-seconds, or an HTTP date, measured against the response's Date
// when it has one and returned as at otherwise. A missing or unreadable
// header gives zeros.
func parseRetryAfter(h http.Header) (delay time.Duration, at time.Time) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, time.Time{}
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		// Past MaxRetryAfter (even past uint64) is MaxRetryAfter.
		return time.Duration(min(n, uint64(MaxRetryAfter/time.Second))) * time.Second, time.Time{}
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, time.Time{}
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		return max(t.Sub(date), 0), time.Time{}
	}
	return 0, t
}

// PostJSON posts body as JSON and classifies the outcome: 2xx is success,
// 408, 429 and 5xx and transport errors are worth a retry, other statuses
// (3xx included: c, or the default client for nil, should not follow
// redirects, see NoRedirects) are final. A refusal is a *StatusError, which holds the Retry-After of a 429
// or 503 for the queue to honour. Errors name the URL by its scheme and
// host only (Redact): the path and query of a Slack or webhook URL carry
// its token, and errors are logged.
func PostJSON(ctx context.Context, c *http.Client, rawURL string, header http.Header, body any) (retry bool, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return false, fmt.Errorf("%w: encode: %v", ErrDelivery, err)
	}
	if c == nil {
		c = NoRedirects(nil)
	}
	where := Redact(rawURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(b))
	if err != nil {
		return false, fmt.Errorf("%w: request %s: %v", ErrDelivery, where, unwrapURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return true, fmt.Errorf("%w: %s: %v", ErrDelivery, where, unwrapURL(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	se := &StatusError{StatusCode: resp.StatusCode,
		err: fmt.Errorf("%w: %s: status %d: %s", ErrDelivery, where, resp.StatusCode, bytes.TrimSpace(snippet))}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		se.RetryAfter, se.RetryAt = parseRetryAfter(resp.Header)
	}
	return resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode/100 == 5, se
}

// Redact renders a receiver URL for logs and errors: its scheme and host,
// without user, path or query, which may hold a secret.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "<invalid url>"
	}
	return u.Scheme + "://" + u.Host
}

// unwrapURL drops the *url.Error around a transport error, which quotes
// the whole URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// NoRedirects returns a copy of client (a default one, bounded by
// DefaultTimeout, for nil) that does not follow redirects: a 3xx is a
// failed delivery, reported with its status. A redirected POST would be
// re-sent as a GET that delivers nothing yet succeeds (301, 302, 303), or
// re-posted to another host with the receiver's URL, and the credentials in
// it, as its Referer (307, 308). Every HTTP receiver builds its client so.
func NoRedirects(client *http.Client) *http.Client {
	c := &http.Client{Timeout: DefaultTimeout}
	if client != nil {
		*c = *client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}
