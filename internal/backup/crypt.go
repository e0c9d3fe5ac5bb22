package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IdentityKey is the key of the key Secret that holds the age X25519
// identity ("AGE-SECRET-KEY-1…").
const IdentityKey = "identity"

// ErrWrongKey is the cause of every refusal to decrypt a backup with a key
// it was not encrypted to.
var ErrWrongKey = errors.New("the key does not match the one the backup was encrypted with")

// Key is the key backups are encrypted to and decrypted with. It never
// prints its secret part.
type Key struct {
	identity *age.X25519Identity
	// Secret names where the key came from, for messages.
	Secret string
}

// KeyFromSecret reads the key Secret. Errors name the Secret, never its
// content.
func KeyFromSecret(secret *corev1.Secret) (*Key, error) {
	ref := secret.Namespace + "/" + secret.Name
	raw, ok := secret.Data[IdentityKey]
	if !ok {
		return nil, fmt.Errorf("the key Secret %s has no key %q", ref, IdentityKey)
	}
	identity, err := age.ParseX25519Identity(strings.TrimSpace(string(raw)))
	if err != nil {
		// age's error can quote the input: say only what is wrong with it.
		return nil, fmt.Errorf("the key Secret %s: %q is not an age X25519 identity (AGE-SECRET-KEY-1…)", ref, IdentityKey)
	}
	return &Key{identity: identity, Secret: ref}, nil
}

// NewKeySecret makes a Secret holding a new key, for the dev environment,
// tests and `lmctl backup` users who create one.
func NewKeySecret(namespace, name string) (*corev1.Secret, error) {
	identity, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{IdentityKey: []byte(identity.String())},
	}, nil
}

// Recipient is the key's public part, which backups are encrypted to.
func (k *Key) Recipient() string { return k.identity.Recipient().String() }

// Fingerprint identifies the key without revealing it: a short hash of the
// recipient, shown in status so that an SRE can tell which key backups were
// encrypted to.
func (k *Key) Fingerprint() string {
	sum := sha256.Sum256([]byte(k.Recipient()))
	return hex.EncodeToString(sum[:6])
}

// Encrypt encrypts a snapshot's bytes to the key.
func (k *Key) Encrypt(plain []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, k.identity.Recipient())
	if err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	if _, err := w.Write(plain); err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	return buf.Bytes(), nil
}

// Decrypt decrypts the named backup. A backup encrypted to another key is
// refused with ErrWrongKey, naming the backup and the key's Secret.
func (k *Key) Decrypt(backup string, cipher []byte) ([]byte, error) {
	r, err := age.Decrypt(bytes.NewReader(cipher), k.identity)
	if err != nil {
		if _, ok := errors.AsType[*age.NoIdentityMatchError](err); ok {
			return nil, fmt.Errorf("backup %s cannot be decrypted with the key in Secret %s: %w", backup, k.Secret, ErrWrongKey)
		}
		return nil, fmt.Errorf("backup %s cannot be decrypted: %w", backup, err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("backup %s cannot be decrypted: %w", backup, err)
	}
	return plain, nil
}
