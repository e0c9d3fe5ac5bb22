// Package image builds the project's container images without Docker: a
// static Go binary on a distroless-style base (a nonroot user, CA
// certificates, /tmp, nothing else) written with go-containerregistry, plus
// an SPDX SBOM of the binary's Go modules. `make images` runs it
// (internal/image/cmd/images); the tests push the result to a registry and
// read it back.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user and group the images run as, the distroless nonroot.
const NonRoot = 65532

// Options describe one image.
type Options struct {
	// Binary is a static linux binary (CGO_ENABLED=0); it becomes
	// /usr/bin/<Name>, the entrypoint.
	Binary string
	// Name is the binary's name in the image, e.g. "lifecycle-manager".
	Name string
	// Version goes into the image's labels.
	Version string
	// CACertificates is a PEM bundle copied to /etc/ssl/certs; empty reads
	// the build machine's /etc/ssl/certs/ca-certificates.crt.
	CACertificates string
}

// epoch is every file's and the image's time, so that a build of the same
// binary gives the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image of opts.Binary.
func Build(opts Options) (v1.Image, error) {
	binary, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	certsPath := opts.CACertificates
	if certsPath == "" {
		certsPath = "/etc/ssl/certs/ca-certificates.crt"
	}
	certs, err := os.ReadFile(certsPath)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificates: %w", err)
	}
	base, err := layer([]file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot))},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, owner: NonRoot},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
	if err != nil {
		return nil, err
	}
	app, err := layer([]file{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/bin/", mode: 0o755, dir: true},
		{name: path.Join("usr/bin", opts.Name), mode: 0o755, data: binary},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, app)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{"/usr/bin/" + opts.Name}
	cfg.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Env = []string{"HOME=/home/nonroot", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   opts.Name,
		"org.opencontainers.image.version": opts.Version,
		"org.opencontainers.image.source":  "https://github.com/runtime-fleet/lifecycle-manager",
	}
	return mutate.ConfigFile(img, cfg)
}

type file struct {
	name  string
	mode  int64
	dir   bool
	owner int
	data  []byte
}

// layer is an uncompressed tar of files, gzipped by go-containerregistry.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch, Uid: f.owner, Gid: f.owner, Format: tar.FormatPAX}
		if f.dir {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
}
