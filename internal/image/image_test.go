package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	spdxjson "github.com/spdx/tools-golang/json"

	"github.com/runtime-fleet/lifecycle-manager/internal/image"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// make images, pushed to a real registry and read back: each image runs as
// nonroot, its binary prints the stamped version, the operator's default
// agent image is the runtime-watcher image pushed with it, by digest, and
// each SBOM lists the binary's modules.
func TestReleaseImagesPushAndRunFromTheRegistry(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	// Cancelled by cleanup rather than defer: the parallel subtests below
	// run after this function has returned, and still pull from reg.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	t.Cleanup(cancel)
	const version = "v9.8.7-test"
	repository := reg.Host() + "/runtime-fleet"
	built, err := image.BuildRelease(ctx, image.ReleaseOptions{Root: root, WorkDir: t.TempDir(), Repository: repository, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != 2 || built[0].Name != "runtime-watcher" || built[1].Name != "lifecycle-manager" {
		t.Fatalf("built %v, want runtime-watcher and lifecycle-manager", built)
	}
	for _, b := range built {
		if err := b.Push(ctx, version); err != nil {
			t.Fatal(err)
		}
	}
	agent := built[0].Ref

	for _, b := range built {
		t.Run(b.Name, func(t *testing.T) {
			// Each image is only read here, so both are checked at once: an
			// image's binary is tens of MB to extract, write out and run.
			t.Parallel()
			imageTag, sbomTag, err := b.Tags(version)
			if err != nil {
				t.Fatal(err)
			}
			pulled, err := remote.Image(imageTag, remote.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			digest, err := pulled.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if digest.String() != b.Ref.DigestStr() {
				t.Errorf("the registry serves %s as %s, built %s", imageTag, digest, b.Ref.DigestStr())
			}
			cfg, err := pulled.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/bin/" + b.Name}) ||
				cfg.Config.Labels["org.opencontainers.image.version"] != version {
				t.Errorf("config user %q, entrypoint %v, labels %v; want 65532:65532, /usr/bin/%s, version %s",
					cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Labels, b.Name, version)
			}
			files := filesOf(t, pulled)
			if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532") {
				t.Errorf("/etc/passwd has no nonroot user: %q", files["etc/passwd"].data)
			}
			if tmp := files["tmp"]; tmp.mode&0o1777 != 0o1777 {
				t.Errorf("/tmp mode %o, want 1777", tmp.mode)
			}
			if len(files["etc/ssl/certs/ca-certificates.crt"].data) == 0 {
				t.Error("the image has no CA certificates")
			}

			out := runVersion(t, files["usr/bin/"+b.Name].data, "--version")
			if !strings.HasPrefix(out, b.Name+" "+version+"\n") {
				t.Errorf("--version printed %q, want %s %s first", out, b.Name, version)
			}
			if b.Name == "lifecycle-manager" && !strings.Contains(out, "agent image: "+agent.String()+"\n") {
				t.Errorf("--version printed %q; want the agent image %s", out, agent)
			}
			// The in-cluster console is a mode of the operator's binary: the
			// chart's lifecycle-manager-console runs this image with it.
			if b.Name == "lifecycle-manager" {
				if out := runVersion(t, files["usr/bin/"+b.Name].data, "console", "--version"); !strings.HasPrefix(out, b.Name+" "+version+"\n") {
					t.Errorf("console --version printed %q, want %s %s first", out, b.Name, version)
				}
			}

			checkSBOM(ctx, t, sbomTag, version)
		})
	}
}

type tarFile struct {
	mode int64
	data []byte
}

// filesOf reads the image's flattened filesystem, by path without leading
// or trailing slashes.
func filesOf(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]tarFile{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(strings.TrimSuffix(hdr.Name, "/"), "/")] = tarFile{mode: hdr.Mode, data: data}
	}
}

// runVersion runs the image's binary with args (--version, or a mode and
// --version), as the container would.
func runVersion(t *testing.T, binary []byte, args ...string) string {
	t.Helper()
	if len(binary) == 0 {
		t.Fatal("the image has no binary at its entrypoint")
	}
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", path, args, err, out)
	}
	return string(out)
}

func checkSBOM(ctx context.Context, t *testing.T, tag name.Tag, version string) {
	t.Helper()
	artifact, err := remote.Image(tag, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pulling the SBOM %s: %v", tag, err)
	}
	layers, err := artifact.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("the SBOM artifact has %d layers (%v), want 1", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); string(mt) != image.SBOMMediaType {
		t.Errorf("the SBOM's media type is %s, want %s", mt, image.SBOMMediaType)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := spdxjson.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the SBOM is not SPDX JSON: %v", err)
	}
	var names []string
	for _, p := range doc.Packages {
		names = append(names, p.PackageName)
	}
	if !slices.Contains(names, "github.com/runtime-fleet/lifecycle-manager") || !slices.Contains(names, "sigs.k8s.io/controller-runtime") {
		t.Errorf("the SBOM lists %v; want the main module and controller-runtime", names)
	}
	if doc.Packages[0].PackageVersion != version {
		t.Errorf("the SBOM's main package has version %q, want %q", doc.Packages[0].PackageVersion, version)
	}
}
