package signing

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// Verify checks that the artifact is signed with one of keys: a payload
// layer of its sha256-<hex>.sig image whose signature verifies with a key
// and whose payload is a cosign signature of exactly this digest. The
// payload's docker-reference is not compared, as cosign does not: the
// digest is what is signed, wherever the artifact was copied.
//
// A missing or unverifiable signature is an *Error (ErrUnsigned,
// ErrUntrusted); a registry failure is returned as it is, without the
// registry's words.
func Verify(ctx context.Context, artifact name.Digest, keys []signature.Verifier, opts ...ociartifact.Option) error {
	_, remoteOpts := ociartifact.Remote(ctx, opts...)
	refusal := &Error{Repository: artifact.Context().Name(), Digest: artifact.DigestStr()}
	tag := artifact.Context().Tag(SignatureTag(artifact.DigestStr()))
	img, err := remote.Image(tag, remoteOpts...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			refusal.Err, refusal.Detail = ErrUnsigned, "the registry has no signature tag "+SignatureTag(artifact.DigestStr())
			return refusal
		}
		return fmt.Errorf("reading the signatures %s: %w", tag, ociartifact.WithoutBody(err))
	}
	ok, found, err := verifyImage(ctx, img, artifact, keys)
	switch {
	case err != nil:
		return fmt.Errorf("reading the signatures %s: %w", tag, err)
	case ok:
		return nil
	case found == 0:
		refusal.Err, refusal.Detail = ErrUnsigned, "its signature tag holds no cosign signature"
	default:
		refusal.Err, refusal.Detail = ErrUntrusted, fmt.Sprintf("%d signatures found, none verifies with the %d trusted keys", found, len(keys))
	}
	return refusal
}

// verifyImage looks through a signature image's payload layers: ok when one
// verifies with a key and signs artifact; found counts the payload layers.
// err is a registry failure only.
func verifyImage(ctx context.Context, img v1.Image, artifact name.Digest, keys []signature.Verifier) (ok bool, found int, err error) {
	manifest, err := img.Manifest()
	if err != nil {
		return false, 0, ociartifact.WithoutBody(err)
	}
	for _, desc := range manifest.Layers {
		if desc.MediaType != SimpleSigningMediaType {
			continue
		}
		found++
		if found > maxSignatures {
			break
		}
		sig, err := base64.StdEncoding.DecodeString(desc.Annotations[SignatureAnnotation])
		if err != nil || len(sig) == 0 || desc.Size > maxPayloadBytes {
			continue
		}
		layer, err := img.LayerByDigest(desc.Digest)
		if err != nil {
			return false, found, ociartifact.WithoutBody(err)
		}
		body, err := ociartifact.ReadLayer(ctx, layer, maxPayloadBytes)
		if err != nil {
			return false, found, err
		}
		if signs(body, sig, artifact, keys) {
			return true, found, nil
		}
	}
	return false, found, nil
}

// signs reports whether sig is a signature of body by one of keys, and body
// a cosign payload for artifact. The signature is checked before the
// payload is read.
func signs(body, sig []byte, artifact name.Digest, keys []signature.Verifier) bool {
	verified := false
	for _, key := range keys {
		if key.VerifySignature(bytes.NewReader(sig), bytes.NewReader(body)) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return false
	}
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(body, &p); err != nil {
		return false
	}
	return p.Critical.Type == payload.CosignSignatureType && p.Critical.Image.DockerManifestDigest == artifact.DigestStr()
}

// VerifyLayer checks that a layer (host/repo@sha256:…, as content links
// name it) belongs to a signed artifact: an artifact of the same repository
// with a signature tag, whose manifest lists the layer and whose signature
// Verify accepts. manifests, when not nil, remembers the layers of
// artifacts looked at (they never change: they are named by digest).
func VerifyLayer(ctx context.Context, layer name.Digest, keys []signature.Verifier, manifests *ManifestCache, opts ...ociartifact.Option) error {
	_, remoteOpts := ociartifact.Remote(ctx, opts...)
	repo := layer.Context()
	tags, err := remote.List(repo, remoteOpts...)
	if err != nil {
		return fmt.Errorf("listing the tags of %s: %w", repo, ociartifact.WithoutBody(err))
	}
	var (
		signedArtifacts int
		refusal         error
	)
	for _, tag := range tags {
		digest := digestOfSignatureTag(tag)
		if digest == "" {
			continue
		}
		if signedArtifacts++; signedArtifacts > maxSignedArtifacts {
			break
		}
		artifact := repo.Digest(digest)
		holds, err := holdsLayer(artifact, layer.DigestStr(), manifests, remoteOpts)
		if err != nil {
			return err
		}
		if !holds {
			continue
		}
		err = Verify(ctx, artifact, keys, opts...)
		var sigErr *Error
		switch {
		case err == nil:
			return nil
		case errors.As(err, &sigErr):
			refusal = err
		default:
			return err
		}
	}
	if refusal != nil {
		var sigErr *Error
		errors.As(refusal, &sigErr)
		return &Error{Repository: repo.Name(), Digest: layer.DigestStr(), Err: sigErr.Err,
			Detail: "the artifact " + sigErr.Digest + " that holds it: " + sigErr.Detail}
	}
	detail := "no signed artifact in the repository holds this layer"
	if signedArtifacts > maxSignedArtifacts {
		detail = fmt.Sprintf("none of the first %d signed artifacts in the repository holds this layer", maxSignedArtifacts)
	}
	return &Error{Repository: repo.Name(), Digest: layer.DigestStr(), Err: ErrUnsigned, Detail: detail}
}

// holdsLayer reports whether the artifact's manifest lists the layer.
func holdsLayer(artifact name.Digest, layer string, manifests *ManifestCache, remoteOpts []remote.Option) (bool, error) {
	layers, ok := manifests.get(artifact.String())
	if !ok {
		desc, err := remote.Get(artifact, remoteOpts...)
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", artifact, ociartifact.WithoutBody(err))
		}
		layers = map[string]bool{}
		if desc.MediaType.IsImage() {
			manifest, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
			if err != nil {
				return false, fmt.Errorf("reading the manifest of %s: %w", artifact, err)
			}
			for _, l := range manifest.Layers {
				layers[l.Digest.String()] = true
			}
		}
		manifests.add(artifact.String(), layers)
	}
	return layers[layer], nil
}
