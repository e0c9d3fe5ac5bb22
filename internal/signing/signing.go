// Package signing signs module artifacts and verifies their signatures in
// cosign's format, so that a module team can sign with `lmctl module sign`
// or with `cosign sign --key`, and an SRE can check with `cosign verify
// --key` what the operator checks:
//
//   - the signature of artifact host/repo@sha256:<hex> is an OCI image tagged
//     sha256-<hex>.sig in the same repository (cosign's tag-based discovery);
//   - each of its layers is a simple-signing payload
//     (application/vnd.dev.cosign.simplesigning.v1+json) that names the
//     artifact's manifest digest, with the base64 signature of the payload in
//     the layer's dev.cosignproject.cosign/signature annotation.
//
// The cryptography is sigstore's (pkg/signature, pkg/cryptoutils): keys are
// PEM files as `cosign generate-key-pair` writes them, PKIX public keys, or
// plain PEM private keys. Keys are never written into errors.
//
// The operator links a module's content by layer digest, not by the
// artifact's digest that signatures name, so VerifyLayer finds the signed
// artifact that holds a layer: a layer is trusted when an artifact in the
// same repository whose manifest lists it carries a signature made with a
// trusted key. Policy remembers what it verified, so a digest is verified
// once per process.
package signing

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Layout of a cosign signature (cosign's specs/SIGNATURE_SPEC.md).
const (
	// SimpleSigningMediaType is the media type of a signature's payload layer.
	SimpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds a payload layer's base64 signature.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"

	signatureTagSuffix = ".sig"
	// maxPayloadBytes bounds a payload layer; real ones are ~250 bytes.
	maxPayloadBytes = 64 << 10
	// maxSignatures bounds the payload layers of one signature image that
	// are looked at (each costs a blob request).
	maxSignatures = 32
	// maxSignedArtifacts bounds the signed artifacts of one repository that
	// VerifyLayer looks into (each, the first time, costs a manifest request).
	maxSignedArtifacts = 1000
)

// SignatureTag is the tag cosign stores the signatures of the artifact
// with manifest digest sha256:<hex> under: sha256-<hex>.sig.
func SignatureTag(digest string) string {
	return strings.Replace(digest, ":", "-", 1) + signatureTagSuffix
}

// digestOfSignatureTag is the artifact digest a signature tag stands for,
// or "" when tag is not one.
func digestOfSignatureTag(tag string) string {
	hexPart, ok := strings.CutPrefix(tag, "sha256-")
	if !ok {
		return ""
	}
	hexPart, ok = strings.CutSuffix(hexPart, signatureTagSuffix)
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return ""
	}
	return "sha256:" + hexPart
}

// ErrUnsigned is the cause of a refusal when no signature was found for
// the content.
var ErrUnsigned = errors.New("is not signed")

// ErrUntrusted is the cause of a refusal when signatures were found, but
// none verifies with a trusted key for the content's digest.
var ErrUntrusted = errors.New("is not signed with a trusted key")

// Error is a refusal of content for its signature: Err is ErrUnsigned or
// ErrUntrusted, Repository the content's host/repo. Registry failures while
// looking for signatures are not an Error: they are returned as they are,
// to be retried.
type Error struct {
	// Repository is host/path of the content.
	Repository string
	// Digest is what was looked for: the layer or artifact digest.
	Digest string
	// Err is ErrUnsigned or ErrUntrusted.
	Err error
	// Detail says what was found, in the package's own words (never a
	// registry's or a key's).
	Detail string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("content %s@%s %s", e.Repository, e.Digest, e.Err)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }
