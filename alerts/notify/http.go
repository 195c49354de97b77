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
	"time"
)

// DefaultTimeout bounds one HTTP delivery attempt.
const DefaultTimeout = 10 * time.Second

// PostJSON posts body as JSON and classifies the outcome: 2xx is success,
// 429 and 5xx and transport errors are worth a retry, other statuses are
// final. Errors name the URL by its scheme and host only (Redact): the path
// and query of a Slack or webhook URL carry its token, and errors are
// logged.
func PostJSON(ctx context.Context, c *http.Client, rawURL string, header http.Header, body any) (retry bool, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return false, fmt.Errorf("%w: encode: %v", ErrDelivery, err)
	}
	if c == nil {
		c = &http.Client{Timeout: DefaultTimeout}
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
	switch {
	case resp.StatusCode/100 == 2:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode/100 == 5:
		return true, fmt.Errorf("%w: %s: status %d: %s", ErrDelivery, where, resp.StatusCode, bytes.TrimSpace(snippet))
	}
	return false, fmt.Errorf("%w: %s: status %d: %s", ErrDelivery, where, resp.StatusCode, bytes.TrimSpace(snippet))
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
