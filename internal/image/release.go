package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const versionPackage = "github.com/runtime-fleet/lifecycle-manager/internal/version"

// ReleaseOptions say what to build and where it goes.
type ReleaseOptions struct {
	// Root is the repository, where go build runs.
	Root string
	// WorkDir receives the binaries.
	WorkDir string
	// Repository prefixes the images' names, e.g. ghcr.io/runtime-fleet.
	Repository string
	// Version is stamped into the binaries and the images.
	Version string
}

// Built is one image with its SBOM.
type Built struct {
	Name  string
	Ref   name.Digest
	Image v1.Image
	SBOM  []byte
}

// BuildRelease builds runtime-watcher, then lifecycle-manager, whose
// default agent image is the runtime-watcher image just built, by digest.
func BuildRelease(ctx context.Context, opts ReleaseOptions) ([]Built, error) {
	agent, err := buildOne(ctx, opts, "runtime-watcher", nil)
	if err != nil {
		return nil, err
	}
	operator, err := buildOne(ctx, opts, "lifecycle-manager", []string{versionPackage + ".AgentImage=" + agent.Ref.String()})
	if err != nil {
		return nil, err
	}
	return []Built{agent, operator}, nil
}

func buildOne(ctx context.Context, opts ReleaseOptions, binName string, stamps []string) (Built, error) {
	bin := filepath.Join(opts.WorkDir, binName)
	ldflags := []string{"-s", "-w", "-X", versionPackage + ".Version=" + opts.Version}
	for _, s := range stamps {
		ldflags = append(ldflags, "-X", s)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "-ldflags", strings.Join(ldflags, " "), "./cmd/"+binName)
	build.Dir = opts.Root
	// A static binary, for a base without a C library.
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		return Built{}, fmt.Errorf("building %s: %w\n%s", binName, err, out)
	}
	img, err := Build(Options{Binary: bin, Name: binName, Version: opts.Version})
	if err != nil {
		return Built{}, fmt.Errorf("building the %s image: %w", binName, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Built{}, err
	}
	ref, err := name.NewDigest(opts.Repository + "/" + binName + "@" + digest.String())
	if err != nil {
		return Built{}, fmt.Errorf("naming the %s image: %w", binName, err)
	}
	sbom, err := SBOM(bin, binName, opts.Version, digest.String())
	if err != nil {
		return Built{}, err
	}
	return Built{Name: binName, Ref: ref, Image: img, SBOM: sbom}, nil
}

// Tags of a pushed image: the version, and the SBOM's, named after the
// image's digest as cosign and ko name theirs (sha256-<hex>.sbom).
func (b Built) Tags(version string) (image, sbom name.Tag, err error) {
	repo := b.Ref.Context()
	if image, err = name.NewTag(repo.String() + ":" + version); err != nil {
		return
	}
	sbom, err = name.NewTag(repo.String() + ":" + strings.Replace(b.Ref.DigestStr(), ":", "-", 1) + ".sbom")
	return
}

// Push pushes the image, tagged with version, and its SBOM.
func (b Built) Push(ctx context.Context, version string, opts ...remote.Option) error {
	imageTag, sbomTag, err := b.Tags(version)
	if err != nil {
		return err
	}
	opts = append(opts, remote.WithContext(ctx))
	if err := remote.Write(imageTag, b.Image, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", imageTag, err)
	}
	sbom := static.NewLayer(b.SBOM, types.MediaType(SBOMMediaType))
	sbomImage, err := sbomArtifact(sbom)
	if err != nil {
		return err
	}
	if err := remote.Write(sbomTag, sbomImage, opts...); err != nil {
		return fmt.Errorf("pushing the SBOM %s: %w", sbomTag, err)
	}
	return nil
}
