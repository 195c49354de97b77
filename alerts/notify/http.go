package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultTimeout bounds one HTTP delivery attempt.
const DefaultTimeout = 10 * time.Second

// PostJSON posts body as JSON and classifies the outcome: 2xx is success,
// 429 and 5xx and transport errors are worth a retry, other statuses are
// final.
func PostJSON(ctx context.Context, c *http.Client, url string, header http.Header, body any) (retry bool, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return false, fmt.Errorf("%w: encode: %v", ErrDelivery, err)
	}
	if c == nil {
		c = &http.Client{Timeout: DefaultTimeout}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return false, fmt.Errorf("%w: request: %v", ErrDelivery, err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return true, fmt.Errorf("%w: %v", ErrDelivery, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode/100 == 2:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode/100 == 5:
		return true, fmt.Errorf("%w: %s: status %d: %s", ErrDelivery, url, resp.StatusCode, bytes.TrimSpace(snippet))
	}
	return false, fmt.Errorf("%w: %s: status %d: %s", ErrDelivery, url, resp.StatusCode, bytes.TrimSpace(snippet))
}
