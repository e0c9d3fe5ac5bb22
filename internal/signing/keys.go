package signing

import (
	"crypto"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PasswordEnv names the environment variable that holds the password of an
// encrypted cosign private key, as cosign reads it; unset means the empty
// password, which is what `COSIGN_PASSWORD= cosign generate-key-pair`
// encrypts with.
const PasswordEnv = "COSIGN_PASSWORD"

// LoadSigner reads a PEM private key: cosign's (ENCRYPTED SIGSTORE PRIVATE
// KEY or ENCRYPTED COSIGN PRIVATE KEY, decrypted with password), PKCS#8
// (PRIVATE KEY), SEC 1 (EC PRIVATE KEY) or PKCS#1 (RSA PRIVATE KEY).
// Payloads are hashed with SHA-256, as cosign does. Errors never quote the
// key.
func LoadSigner(pemBytes, password []byte) (signature.Signer, error) {
	if block, _ := pem.Decode(pemBytes); block == nil {
		return nil, errors.New("no PEM block found: want a PEM private key (cosign.key, or PRIVATE KEY / EC PRIVATE KEY)")
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	signer, err := signature.LoadSigner(key, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading the private key: %w", err)
	}
	pub, err := signer.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("deriving the public key: %w", err)
	}
	if err := cryptoutils.ValidatePubKey(pub); err != nil {
		return nil, fmt.Errorf("the key is refused: %w", err)
	}
	return signer, nil
}

// LoadSignerFile reads LoadSigner's key from a file, with the password in
// $COSIGN_PASSWORD.
func LoadSignerFile(path string) (signature.Signer, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the path is the user's own choice of key file
	if err != nil {
		return nil, err
	}
	signer, err := LoadSigner(data, []byte(os.Getenv(PasswordEnv)))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return signer, nil
}

// LoadVerifier reads a PEM PKIX public key (PUBLIC KEY, as cosign.pub), an
// ECDSA, RSA or Ed25519 key that sigstore accepts; signatures are checked
// over the SHA-256 of the payload.
func LoadVerifier(pemBytes []byte) (signature.Verifier, error) {
	if block, _ := pem.Decode(pemBytes); block == nil {
		return nil, errors.New("no PEM block found: want a PEM public key (cosign.pub, PUBLIC KEY)")
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the public key: %w", err)
	}
	if err := cryptoutils.ValidatePubKey(pub); err != nil {
		return nil, fmt.Errorf("the public key is refused: %w", err)
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading the public key: %w", err)
	}
	return verifier, nil
}

// LoadVerifierFile reads LoadVerifier's key from a file.
func LoadVerifierFile(path string) (signature.Verifier, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the path is the operator's configuration
	if err != nil {
		return nil, err
	}
	verifier, err := LoadVerifier(data)
	if err != nil {
		return nil, fmt.Errorf("public key file %s: %w", path, err)
	}
	return verifier, nil
}
