package fetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// getHTTP reads the body of an http(s) link.
func (f *Fetcher) getHTTP(ctx context.Context, l link) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", l, err)
	}
	resp, err := f.http.Do(req)
	if err != nil {
		// net/http leaves the password out of the URL in its errors.
		return nil, fmt.Errorf("fetching %s: %w", l, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: server answered %s", l, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", l, err)
	}
	if len(data) > maxHTTPBody {
		return nil, fmt.Errorf("fetching %s: content is larger than %d bytes", l, maxHTTPBody)
	}
	return data, nil
}
