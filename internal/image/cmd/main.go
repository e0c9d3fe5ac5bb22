// Command images is `make images`: it builds the runtime-watcher and
// lifecycle-manager images without Docker into an OCI layout, with an SPDX
// SBOM each, and pushes them when asked (docs/install.md, "Images").
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/runtime-fleet/lifecycle-manager/internal/image"
)

func main() {
	var opts image.ReleaseOptions
	var out string
	var push bool
	flag.StringVar(&opts.Repository, "repository", "ghcr.io/runtime-fleet", "Registry and path the images are named under.")
	flag.StringVar(&opts.Version, "version", "dev", "Version stamped into the binaries (--version) and the images' tag and labels.")
	flag.StringVar(&out, "out", "bin/images", "Directory of the OCI layout and the SBOMs.")
	flag.BoolVar(&push, "push", false, "Push the images and their SBOMs, with the credentials of ~/.docker/config.json.")
	flag.Parse()
	if err := run(opts, out, push); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(opts image.ReleaseOptions, out string, push bool) error {
	ctx := context.Background()
	var err error
	if opts.Root, err = os.Getwd(); err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	opts.WorkDir = filepath.Join(out, "bin")
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return err
	}
	built, err := image.BuildRelease(ctx, opts)
	if err != nil {
		return err
	}
	oci, err := layout.Write(filepath.Join(out, "oci"), empty.Index)
	if err != nil {
		return err
	}
	for _, b := range built {
		tag, _, err := b.Tags(opts.Version)
		if err != nil {
			return err
		}
		if err := oci.AppendImage(b.Image, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.String()})); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, b.Name+".spdx.json"), b.SBOM, 0o644); err != nil {
			return err
		}
		if push {
			if err := b.Push(ctx, opts.Version, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
				return err
			}
		}
		fmt.Println(b.Ref.String())
	}
	return nil
}
