package image

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
)

// SBOMMediaType is the media type of the SBOM pushed with an image.
const SBOMMediaType = "application/spdx+json"

// SBOM is an SPDX 2.3 document of the Go binary: its main module and every
// module linked into it, with versions and checksums, as the Go toolchain
// recorded them in the binary (the same data `go version -m` prints). Its
// namespace names the image it describes.
func SBOM(binaryPath, name, version, imageDigest string) ([]byte, error) {
	info, err := buildinfo.ReadFile(binaryPath)
	if err != nil {
		return nil, fmt.Errorf("reading the build information of %s: %w", binaryPath, err)
	}
	main := &spdx.Package{
		PackageName:             info.Main.Path,
		PackageSPDXIdentifier:   "Package-main",
		PackageVersion:          version,
		PackageDownloadLocation: "NOASSERTION",
		PackageExternalReferences: []*spdx.PackageExternalReference{
			{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: purl(info.Main.Path, version)},
		},
		PackageComment: "built with " + info.GoVersion,
	}
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      name + "-" + version,
		DocumentNamespace: "https://github.com/runtime-fleet/lifecycle-manager/sbom/" + name + "/" + imageDigest,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "lifecycle-manager-images"}},
			Created:  epoch.Format("2006-01-02T15:04:05Z"),
		},
		Packages: []*spdx.Package{main},
		Relationships: []*spdx.Relationship{{
			RefA: common.MakeDocElementID("", "DOCUMENT"), RefB: common.MakeDocElementID("", "Package-main"), Relationship: "DESCRIBES",
		}},
	}
	for i, dep := range info.Deps {
		mod := dep
		if dep.Replace != nil {
			mod = dep.Replace
		}
		id := common.ElementID(fmt.Sprintf("Package-%d-%s", i, idChars.ReplaceAllString(mod.Path, "-")))
		pkg := &spdx.Package{
			PackageName:             mod.Path,
			PackageSPDXIdentifier:   id,
			PackageVersion:          mod.Version,
			PackageDownloadLocation: "NOASSERTION",
			PackageExternalReferences: []*spdx.PackageExternalReference{
				{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: purl(mod.Path, mod.Version)},
			},
		}
		if mod.Sum != "" {
			pkg.PackageComment = "go.sum " + mod.Sum
		}
		doc.Packages = append(doc.Packages, pkg)
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", "Package-main"), RefB: common.MakeDocElementID("", string(id)), Relationship: "DEPENDS_ON",
		})
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// idChars are the characters an SPDX identifier may not hold.
var idChars = regexp.MustCompile(`[^A-Za-z0-9.-]`)

func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}

// sbomArtifact is an OCI artifact of one SBOM layer.
func sbomArtifact(layer v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}
