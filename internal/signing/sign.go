package signing

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// Signed says what Sign signed and where the signature is.
type Signed struct {
	// Artifact is the signed artifact by digest: host/repo@sha256:….
	Artifact name.Digest
	// Signature is its signature image: host/repo:sha256-….sig.
	Signature name.Tag
	// Added is false when the artifact already carried a signature by the
	// same key, which was kept.
	Added bool
}

// Sign signs the artifact ref names (host/repo:tag, host/repo@sha256:…, an
// oci:// prefix allowed) with signer and stores the signature as cosign
// does: a layer with the simple-signing payload of the artifact's manifest
// digest, added to the image tagged sha256-<hex>.sig next to it, whose other
// signatures are kept. Signing again with the same key changes nothing.
//
// This is what `lmctl module sign` calls, and what `lmctl module push
// --sign` is to call after the push with the artifact's digest.
func Sign(ctx context.Context, ref string, signer signature.Signer, opts ...ociartifact.Option) (Signed, error) {
	nameOpts, remoteOpts := ociartifact.Remote(ctx, opts...)
	parsed, err := name.ParseReference(strings.TrimPrefix(ref, "oci://"), nameOpts...)
	if err != nil {
		return Signed{}, fmt.Errorf("parsing %q: %w", ref, err)
	}
	desc, err := remote.Head(parsed, remoteOpts...)
	if err != nil {
		return Signed{}, fmt.Errorf("looking up %s: %w", parsed, ociartifact.WithoutBody(err))
	}
	artifact := parsed.Context().Digest(desc.Digest.String())
	sigTag := parsed.Context().Tag(SignatureTag(desc.Digest.String()))

	payloadJSON, err := payload.Cosign{Image: artifact}.MarshalJSON()
	if err != nil {
		return Signed{}, fmt.Errorf("making the payload: %w", err)
	}
	base, err := signatureImage(sigTag, remoteOpts)
	if err != nil {
		return Signed{}, err
	}
	if signedBy(ctx, base, artifact, signer) {
		return Signed{Artifact: artifact, Signature: sigTag}, nil
	}
	sig, err := signer.SignMessage(bytes.NewReader(payloadJSON))
	if err != nil {
		return Signed{}, fmt.Errorf("signing: %w", err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(payloadJSON, SimpleSigningMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return Signed{}, fmt.Errorf("adding the signature: %w", err)
	}
	if err := remote.Write(sigTag, img, remoteOpts...); err != nil {
		return Signed{}, fmt.Errorf("pushing the signature %s: %w", sigTag, ociartifact.WithoutBody(err))
	}
	return Signed{Artifact: artifact, Signature: sigTag, Added: true}, nil
}

// signatureImage is the signature image at tag, or an empty one (an OCI
// manifest, as cosign writes) when there is none yet.
func signatureImage(tag name.Tag, remoteOpts []remote.Option) (v1.Image, error) {
	img, err := remote.Image(tag, remoteOpts...)
	if err == nil {
		return img, nil
	}
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), nil
	}
	return nil, fmt.Errorf("reading the signatures %s: %w", tag, ociartifact.WithoutBody(err))
}

// signedBy reports whether img already holds a signature of artifact that
// verifies with signer's public key.
func signedBy(ctx context.Context, img v1.Image, artifact name.Digest, signer signature.Signer) bool {
	pub, err := signer.PublicKey()
	if err != nil {
		return false
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return false
	}
	ok, _, err := verifyImage(ctx, img, artifact, []signature.Verifier{verifier})
	return err == nil && ok
}
