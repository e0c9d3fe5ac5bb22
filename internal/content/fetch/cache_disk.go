package fetch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// diskCache keeps content in files named by digest under a directory.
// A file is written under a temporary name and renamed into place, so a
// crash never leaves a partial file under a digest's name; a file is verified
// against its digest when read, so a damaged one is dropped and fetched anew.
type diskCache struct {
	dir string
}

func newDiskCache(dir string) (*diskCache, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("creating content cache directory: %w", err)
	}
	return &diskCache{dir: dir}, nil
}

func (c *diskCache) path(digest string) string {
	return filepath.Join(c.dir, "sha256", strings.TrimPrefix(digest, digestAlgoName))
}

// get returns the content of digest, or false when there is none or it no
// longer matches its digest.
func (c *diskCache) get(digest string) ([]byte, bool, error) {
	data, err := os.ReadFile(c.path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading cached %s: %w", digest, err)
	}
	if digestOf(data) != digest {
		if err := os.Remove(c.path(digest)); err != nil {
			return nil, false, fmt.Errorf("removing damaged cached %s: %w", digest, err)
		}
		return nil, false, nil
	}
	return data, true, nil
}

func (c *diskCache) put(digest string, data []byte) error {
	dir := filepath.Dir(c.path(digest))
	tmp, err := os.CreateTemp(dir, ".partial-*")
	if err != nil {
		return fmt.Errorf("caching %s: %w", digest, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("caching %s: %w", digest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("caching %s: %w", digest, err)
	}
	if err := os.Rename(tmp.Name(), c.path(digest)); err != nil {
		return fmt.Errorf("caching %s: %w", digest, err)
	}
	return nil
}
