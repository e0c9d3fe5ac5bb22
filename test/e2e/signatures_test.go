package e2e

import (
	"context"
	"crypto/elliptic"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// requireSignatures starts env.signedRegistry and a key pair, and returns
// the operator's --require-signatures for that registry alone: every other
// registry of the tests (on other ports of 127.0.0.1) requires none.
func requireSignatures(e *testenv.Env) (map[string][]string, error) {
	env.signedRegistry = testregistry.Start()
	e.Cleanup(env.signedRegistry.Close)
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		return nil, err
	}
	if env.signingKey, err = signing.LoadSigner(privPEM, nil); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "e2e-signing-")
	if err != nil {
		return nil, err
	}
	e.Cleanup(func() { _ = os.RemoveAll(dir) })
	pubFile := filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(pubFile, pubPEM, 0o600); err != nil {
		return nil, err
	}
	return map[string][]string{env.signedRegistry.Host(): {pubFile}}, nil
}

// publishArtifact is publish that also returns the pushed artifact, to sign.
func publishArtifact(t *testing.T, reg *testregistry.Registry, module, version string, content ociartifact.Module) ociartifact.Artifact {
	t.Helper()
	g := NewWithT(t)
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:%s", reg.Host(), module, version), content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	template := samplemodules.Version{Module: module, Version: version}.Template(kcpNamespace, artifact.Links)
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	return artifact
}

// sign signs a pushed artifact as `lmctl module sign` does.
func sign(g Gomega, artifact ociartifact.Artifact, signer signature.Signer) {
	_, err := signing.Sign(context.Background(), artifact.Ref, signer, ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
}

// TestSignedContentIsRequiredWhereConfigured: from a registry the operator
// requires signatures for, signed content installs; an unsigned version and
// a version signed with another key give the module an Error that says what
// to fix, and leave the installed version as it is (same object, same data);
// signing the version with the trusted key afterwards installs it.
func TestSignedContentIsRequiredWhereConfigured(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const name = "signed-module"
	reg := env.signedRegistry

	sign(g, publishArtifact(t, reg, name, "1.0.0", ociartifact.Module{RawManifest: goodManifest(name, "1.0.0")}), env.signingKey)
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))
	k.eventuallyReady(t)
	installed := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(installed, name+"-config")).To(Succeed())

	// 2.0.0 is not signed at all.
	publishArtifact(t, reg, name, "2.0.0", ociartifact.Module{RawManifest: goodManifest(name, "2.0.0")})
	setChannel(t, name, "regular", "2.0.0")
	expectSignatureRefusedKeepsInstalled(t, k, name, installed, "has no signature", "is not signed")

	// 2.0.1 is signed, with a key the operator does not trust.
	other, _, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	otherKey, err := signing.LoadSigner(other, nil)
	g.Expect(err).NotTo(HaveOccurred())
	next := publishArtifact(t, reg, name, "2.0.1", ociartifact.Module{RawManifest: goodManifest(name, "2.0.1")})
	sign(g, next, otherKey)
	setChannel(t, name, "regular", "2.0.1")
	expectSignatureRefusedKeepsInstalled(t, k, name, installed, "is signed, but with no key the operator trusts", "is not signed with a trusted key")

	// Signing 2.0.1 with the trusted key is all it takes.
	sign(g, next, env.signingKey)
	expectModuleReadyAt(t, k, name, "2.0.1")
}

// expectSignatureRefusedKeepsInstalled waits for the module's Error with
// the signature message, the Manifest's SignatureInvalid reason and the
// refusal in its events, and checks that the installed ConfigMap is the
// same object with the same data.
func expectSignatureRefusedKeepsInstalled(t *testing.T, k *testKyma, module string, installed *corev1.ConfigMap, message, event string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, module)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		g.Expect(m.Message).To(ContainSubstring(message))
		g.Expect(m.Message).To(ContainSubstring("--require-signatures"))
		g.Expect(m.Message).NotTo(ContainSubstring("BEGIN"), "no key material")
		g.Expect(k.get(g).Status.State).To(Equal(v1beta2.StateError))
		mf := &v1beta2.Manifest{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, module)}, mf)).To(Succeed())
		ready := meta.FindStatusCondition(mf.Status.Conditions, v1beta2.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(manifest.ReasonSignatureInvalid))
		g.Expect(manifestWarnings(g, kyma.ManifestName(k.name, module))).To(ContainElement(ContainSubstring(event)))
	}, timeout, interval).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, module+"-config")).To(Succeed(), "a refused version deletes nothing")
	g.Expect(cm.UID).To(Equal(installed.UID), "the installed object is not recreated")
	g.Expect(cm.Data).To(Equal(installed.Data), "the installed version stays")
}
