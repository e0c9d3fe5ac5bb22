package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// caCommonName is the subject of the watcher CA.
const caCommonName = "lifecycle-manager-watcher-ca"

// EnsureCA returns the CA kept in the Secret namespace/name (type
// kubernetes.io/tls), creating the namespace and a new CA valid for validity
// when they do not exist yet. Whoever can read that Secret can issue a
// certificate for any runtime, so the namespace should be readable by the
// operator alone (docs/watcher.md). c must not be a cache scoped to other
// namespaces.
func EnsureCA(ctx context.Context, c client.Client, namespace, name string, validity time.Duration) (*CA, error) {
	if err := ensureNamespace(ctx, c, namespace); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := c.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		created, createErr := createCA(ctx, c, key, validity)
		if createErr == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(createErr) {
			return nil, createErr
		}
		// Another replica was first; use its CA.
		err = c.Get(ctx, key, secret)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the watcher CA %s/%s: %w", namespace, name, err)
	}
	ca, err := ParseCA(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("the watcher CA in %s/%s: %w", namespace, name, err)
	}
	if time.Now().After(ca.cert.NotAfter) {
		return nil, fmt.Errorf("the watcher CA in %s/%s expired at %s; delete the Secret to create a new CA (all runtimes then get new certificates)",
			namespace, name, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ca, nil
}

// ensureNamespace creates the PKI namespace unless it exists. It looks
// first: an installed operator may read that one namespace but create none
// (config/rbac), and the API server refuses a create it may not make before
// it would answer that the namespace exists.
func ensureNamespace(ctx context.Context, c client.Client, namespace string) error {
	err := c.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the PKI namespace %s: %w", namespace, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the PKI namespace %s: %w", namespace, err)
	}
	return nil
}

func createCA(ctx context.Context, c client.Client, key client.ObjectKey, validity time.Duration) (*CA, error) {
	ca, err := NewCA(caCommonName, validity)
	if err != nil {
		return nil, err
	}
	keyBytes, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: ca.CertPEM(), corev1.TLSPrivateKeyKey: keyBytes, CAKey: ca.CertPEM()},
	}
	if err := c.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		return nil, fmt.Errorf("storing the watcher CA in %s: %w", key, err)
	}
	return ca, nil
}

// x509KeyPair checks that keyPEM is the private key of cert.
func x509KeyPair(cert *x509.Certificate, keyPEM []byte) (tls.Certificate, error) {
	return tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), keyPEM)
}
