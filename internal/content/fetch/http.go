package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// getHTTP reads the body of an http(s) link: refused unread when it
// declares more than the cap, read through the cap otherwise, within the
// in-flight budget. Errors carry the status code, never the body or the
// server's reason phrase, which the server chooses.
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
		return nil, fmt.Errorf("fetching %s: server answered %d %s", l, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	if resp.ContentLength > f.cfg.maxBytes {
		return nil, fmt.Errorf("fetching %s: %w: the server declares %d bytes, the limit is %d (--content-max-bytes)",
			l, ociartifact.ErrTooLarge, resp.ContentLength, f.cfg.maxBytes)
	}
	release, err := f.budget.reserve(ctx, resp.ContentLength)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", l, err)
	}
	defer release()
	data, err := readCapped(resp.Body, resp.ContentLength, f.cfg.maxBytes)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", l, err)
	}
	return data, nil
}

// readCapped reads a body of declared length (-1: unknown), at most
// maxBytes. A known length is allocated once, so that reading does not
// double the buffer on the way.
func readCapped(body io.Reader, declared, maxBytes int64) ([]byte, error) {
	var buf bytes.Buffer
	if declared > 0 {
		buf.Grow(int(declared))
	}
	n, err := buf.ReadFrom(io.LimitReader(body, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if n > maxBytes {
		return nil, fmt.Errorf("%w: the body goes on past %d bytes (--content-max-bytes)", ociartifact.ErrTooLarge, maxBytes)
	}
	return buf.Bytes(), nil
}
