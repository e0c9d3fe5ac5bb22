package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
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
	if err := strongEnough(pub); err != nil {
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
	if err := strongEnough(pub); err != nil {
		return nil, fmt.Errorf("the public key is refused: %w", err)
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading the public key: %w", err)
	}
	return verifier, nil
}

// strongEnough refuses what cosign would not make: RSA keys under 2048
// bits and ECDSA keys off the NIST curves P-256, P-384 and P-521. Ed25519
// is fine.
func strongEnough(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("RSA key of %d bits; use ECDSA P-256 (cosign generate-key-pair) or RSA of 2048 bits or more", k.N.BitLen())
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return errors.New("ECDSA key on an unsupported curve; use P-256 (cosign generate-key-pair)")
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("unsupported key type %T; use ECDSA P-256 (cosign generate-key-pair)", pub)
	}
	return nil
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
