package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// gzipMagic starts every gzip stream; a tar has "ustar" at offset 257.
var (
	gzipMagic = []byte{0x1f, 0x8b}
	tarMagic  = []byte("ustar")
)

const tarMagicOffset = 257

// Unpack returns the YAML a raw manifest holds when it is packed, as Kyma's
// module tooling packs a directory of manifests: a tar, or a gzip of one
// (or a gzip of plain YAML). The files ending in .yaml, .yml or .json are
// joined in the archive's order as documents of one manifest; other files
// (a README) are skipped. Content that is neither gzip nor tar is returned
// as it is. Unpacked content above maxBytes is refused (a small archive may
// expand to any size); 0 or less leaves it unbounded.
func Unpack(data []byte, maxBytes int64) ([]byte, error) {
	if bytes.HasPrefix(data, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("reading gzip: %w", err)
		}
		defer zr.Close()
		unzipped, err := readAtMost(zr, maxBytes)
		if err != nil {
			return nil, fmt.Errorf("reading gzip: %w", err)
		}
		data = unzipped
	}
	if !isTar(data) {
		return data, nil
	}
	return joinTar(data, maxBytes)
}

func isTar(data []byte) bool {
	return len(data) >= tarMagicOffset+len(tarMagic) && bytes.Equal(data[tarMagicOffset:tarMagicOffset+len(tarMagic)], tarMagic)
}

// joinTar joins the manifest files of a tar.
func joinTar(data []byte, maxBytes int64) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	var out bytes.Buffer
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg || !isManifestFile(h.Name) {
			continue
		}
		left := int64(-1)
		if maxBytes > 0 {
			if left = maxBytes - int64(out.Len()); left <= 0 {
				return nil, fmt.Errorf("%w (%d bytes)", errUnpackedTooLarge, maxBytes)
			}
		}
		file, err := readAtMost(tr, left)
		if err != nil {
			return nil, fmt.Errorf("tar file %s: %w", h.Name, err)
		}
		if files > 0 {
			out.WriteString("\n---\n")
		}
		out.Write(file)
		files++
	}
	if files == 0 {
		return nil, errors.New("the tar holds no .yaml, .yml or .json file")
	}
	return out.Bytes(), nil
}

func isManifestFile(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return !strings.HasPrefix(path.Base(name), ".")
	}
	return false
}

// errUnpackedTooLarge is the refusal of an archive that expands past the
// limit.
var errUnpackedTooLarge = errors.New("unpacked content is larger than the limit")

// readAtMost reads r whole, refusing more than limit bytes; a negative or
// zero limit reads all.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	if limit <= 0 {
		return io.ReadAll(r)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", errUnpackedTooLarge, limit)
	}
	return data, nil
}

// PackChart writes the chart in directory dir of fsys as a .tgz laid out as
// `helm package` lays it out: every file under a top-level directory named
// name, in sorted order (the same chart gives the same bytes, so the same
// digest). Directories below dir whose names start with a dot are left out.
func PackChart(fsys fs.FS, dir, name string) ([]byte, error) {
	var names []string
	err := fs.WalkDir(fsys, dir, func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && f != dir && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		if !d.IsDir() {
			names = append(names, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading chart %s: %w", dir, err)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range names {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		rel := name + "/" + strings.TrimPrefix(f, dir+"/")
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
