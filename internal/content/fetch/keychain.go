package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretKeychain gives registry credentials from a kubernetes.io/
// dockerconfigjson Secret in the control plane, the one the operator's
// --registry-credentials-secret names. The Secret is read at every
// resolution (through the manager's cache, so it costs no request), so a
// rotated or newly created Secret is used at once, without a restart.
//
// The credentials are matched to registries the way the kubelet matches
// image pull Secrets (go-containerregistry's authn/kubernetes). Registries
// the Secret does not name, and every registry while the Secret does not
// exist, are read anonymously. They never leave the operator: nothing of
// them is written to a runtime, a status, an event or a log.
type SecretKeychain struct {
	reader client.Reader
	key    client.ObjectKey

	mu sync.Mutex
	// revision is the Secret's resourceVersion keychain was built from, so
	// that the Secret is parsed once per change rather than per request.
	revision string
	keychain authn.Keychain
}

var _ authn.ContextKeychain = &SecretKeychain{}

// NewSecretKeychain reads the Secret key through reader.
func NewSecretKeychain(reader client.Reader, key client.ObjectKey) *SecretKeychain {
	return &SecretKeychain{reader: reader, key: key}
}

// Resolve implements authn.Keychain.
func (k *SecretKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), target)
}

// ResolveContext implements authn.ContextKeychain.
func (k *SecretKeychain) ResolveContext(ctx context.Context, target authn.Resource) (authn.Authenticator, error) {
	keychain, err := k.current(ctx)
	if err != nil {
		return nil, err
	}
	if keychain == nil {
		return authn.Anonymous, nil
	}
	return authn.Resolve(ctx, keychain, target)
}

// current returns the keychain of the Secret as it is now, or nil when the
// Secret does not exist.
func (k *SecretKeychain) current(ctx context.Context) (authn.Keychain, error) {
	secret := &corev1.Secret{}
	if err := k.reader.Get(ctx, k.key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			logr.FromContextOrDiscard(ctx).V(1).Info("Registry credentials Secret not found; reading registries anonymously", "secret", k.key.String())
			return nil, nil
		}
		return nil, fmt.Errorf("reading the registry credentials Secret %s: %w", k.key, err)
	}
	if secret.Type != corev1.SecretTypeDockerConfigJson || len(secret.Data[corev1.DockerConfigJsonKey]) == 0 {
		return nil, fmt.Errorf("the registry credentials Secret %s must have type %s and the key %s",
			k.key, corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey)
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keychain != nil && k.revision == secret.ResourceVersion {
		return k.keychain, nil
	}
	keychain, err := kubernetes.NewFromPullSecrets(ctx, []corev1.Secret{*secret})
	if err != nil {
		return nil, fmt.Errorf("the registry credentials Secret %s holds no valid docker config in %s: %s",
			k.key, corev1.DockerConfigJsonKey, describeConfigError(err))
	}
	k.keychain, k.revision = keychain, secret.ResourceVersion
	return keychain, nil
}

// describeConfigError says what is wrong with a docker config without
// quoting it: decoder errors may quote a character of the input, and the
// input is a password.
func describeConfigError(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("it is not JSON (syntax error at byte %d)", syntax.Offset)
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("field %q must be a %s", typeErr.Field, typeErr.Type)
	}
	return "an entry of auths cannot be decoded; auth must be base64(username:password)"
}
