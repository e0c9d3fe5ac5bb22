package ocm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strings"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Names of the resources a module's component version carries, as Kyma's
// module tooling (modulectl, kyma alpha create module) writes them.
const (
	// RawManifestResource is the module's manifests: YAML, or a tar
	// (optionally gzip-compressed) of YAML files. Every module has one.
	RawManifestResource = "raw-manifest"
	// CRDsResource is the module's CRDs, kept apart by older tooling.
	CRDsResource = "crds"
)

// Access types this operator reads.
const (
	accessLocalBlob = "localBlob"
	// accessLocalOCIBlob is the name older tooling gave localBlob, with the
	// digest in access.digest.
	accessLocalOCIBlob = "localOciBlob"
	accessOCIBlob      = "ociBlob"
)

// parts maps the resources this operator installs to the content parts
// they become; every other resource (the manager image, sources,
// associated resources, the default CR, which templates carry in
// spec.data) is informational here.
var parts = []struct {
	resource, part string
	required       bool
}{
	{RawManifestResource, v1beta2.RawManifestResourceName, true},
	{CRDsResource, v1beta2.CRDsResourceName, false},
}

// contentMediaTypes are the media types of manifests the content pipeline
// renders: YAML or JSON documents, or a tar of them, gzip-compressed or not
// (it tells them apart by their bytes).
var contentMediaTypes = []string{
	"application/octet-stream",
	"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain", "application/json",
	"application/x-tar", "application/tar",
	"application/gzip", "application/x-gzip", "application/x-tgz", "application/tar+gzip", "application/x-gtar",
	"application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar+gzip",
}

// Contents turns a component version's resources into content parts with
// digest-pinned oci:// links, in the order parts lists them. repo is the
// repository the component version is stored in, where its localBlob
// resources are layers.
func Contents(d *Descriptor, repo Repository) ([]v1beta2.ContentResource, error) {
	var out []v1beta2.ContentResource
	for _, p := range parts {
		res, ok := findResource(d.Component.Resources, p.resource)
		if !ok {
			if p.required {
				return nil, invalid("component %s has no resource %q (it has %s); the module's manifests must be its %q resource",
					d.Component, p.resource, resourceNames(d.Component.Resources), p.resource)
			}
			continue
		}
		link, err := linkOf(d.Component, res, repo)
		if err != nil {
			return nil, err
		}
		out = append(out, v1beta2.ContentResource{Name: p.part, Link: link})
	}
	return out, nil
}

// complete says whether a descriptor carries every resource Contents needs,
// so that the registry need not be asked for it.
func complete(d *Descriptor) bool {
	for _, p := range parts {
		if _, ok := findResource(d.Component.Resources, p.resource); p.required && !ok {
			return false
		}
	}
	return true
}

func findResource(resources []Resource, name string) (Resource, bool) {
	for _, r := range resources {
		if r.Name == name {
			return r, true
		}
	}
	return Resource{}, false
}

func resourceNames(resources []Resource) string {
	if len(resources) == 0 {
		return "no resources"
	}
	names := make([]string, 0, len(resources))
	for _, r := range resources {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return "resources " + strings.Join(names, ", ")
}

// linkOf is the digest-pinned link to a resource's bytes.
func linkOf(c Component, res Resource, repo Repository) (string, error) {
	a := res.Access
	switch a.Type {
	case accessLocalBlob, accessLocalBlob + "/v1", accessLocalOCIBlob, accessLocalOCIBlob + "/v1":
		digest := a.LocalReference
		if digest == "" {
			digest = a.Digest
		}
		if err := checkDigest(digest); err != nil {
			return "", invalid("component %s, resource %q: localBlob reference %q: %v", c, res.Name, digest, err)
		}
		if err := checkMediaType(a.MediaType); err != nil {
			return "", invalid("component %s, resource %q: %v", c, res.Name, err)
		}
		return "oci://" + repo.Name + "@" + digest, nil
	case accessOCIBlob, accessOCIBlob + "/v1":
		if err := checkDigest(a.Digest); err != nil {
			return "", invalid("component %s, resource %q: ociBlob digest %q: %v", c, res.Name, a.Digest, err)
		}
		if err := checkMediaType(a.MediaType); err != nil {
			return "", invalid("component %s, resource %q: %v", c, res.Name, err)
		}
		ref := strings.TrimPrefix(a.Ref, "oci://")
		if ref == "" || strings.ContainsAny(ref, "@") || !strings.Contains(ref, "/") {
			return "", invalid("component %s, resource %q: ociBlob ref %q: want host/repository", c, res.Name, a.Ref)
		}
		return "oci://" + ref + "@" + a.Digest, nil
	case "":
		return "", invalid("component %s, resource %q has no access type", c, res.Name)
	}
	return "", invalid("component %s, resource %q: access type %q is not supported; publish it as a localBlob of the component version (or an ociBlob)", c, res.Name, a.Type)
}

func checkDigest(digest string) error {
	sum, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return errors.New("want sha256:<64 hex digits>")
	}
	if len(sum) != hex.EncodedLen(sha256.Size) || strings.Trim(sum, "0123456789abcdef") != "" {
		return errors.New("want sha256:<64 lowercase hex digits>")
	}
	return nil
}

// checkMediaType accepts the media types whose bytes the content pipeline
// renders. An empty one is read as application/octet-stream.
func checkMediaType(mediaType string) error {
	if mediaType == "" {
		return nil
	}
	base, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		return fmt.Errorf("media type %q cannot be parsed", mediaType)
	}
	if slices.Contains(contentMediaTypes, base) || strings.HasSuffix(base, "+yaml") {
		return nil
	}
	return fmt.Errorf("media type %q is not supported; want YAML or JSON, or a tar or tar+gzip of YAML files", mediaType)
}
