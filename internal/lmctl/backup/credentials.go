package backup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// PasswordEnv is the environment variable lmctl takes the registry
// password from with --registry-username: a password on the command line
// would show in the process list and the shell's history.
const PasswordEnv = "LMCTL_REGISTRY_PASSWORD"

// Credentials say how lmctl logs in to the backups' registry, at most one
// way; none is the docker default (~/.docker/config.json, $DOCKER_CONFIG,
// credential helpers), anonymous where that has nothing.
type Credentials struct {
	// Secret is a kubernetes.io/dockerconfigjson Secret in the namespace,
	// read through the kubeconfig: the operator's
	// --registry-credentials-secret, so restore logs in as backups were
	// pushed.
	Secret string
	// DockerConfig is a docker config file (config.json), or a directory
	// holding one; its auths are matched to registries as the operator
	// matches its Secret's.
	DockerConfig string
	// Username and Password log in to the backups' registry.
	Username string
	Password string `json:"-"`
}

// flags the credentials were given with, for messages.
func (c Credentials) given() []string {
	var out []string
	if c.Secret != "" {
		out = append(out, "--registry-credentials-secret")
	}
	if c.DockerConfig != "" {
		out = append(out, "--docker-config")
	}
	if c.Username != "" {
		out = append(out, "--registry-username")
	}
	return out
}

// keychain is the keychain the credentials stand for, and how it logs in,
// for messages.
func (c Credentials) keychain(ctx context.Context, kcp client.Reader, namespace string) (authn.Keychain, string, error) {
	if given := c.given(); len(given) > 1 {
		return nil, "", fmt.Errorf("%v: give registry credentials one way only", given)
	}
	switch {
	case c.Secret != "":
		key := client.ObjectKey{Namespace: namespace, Name: c.Secret}
		// The operator reads a missing Secret as "anonymous"; a person who
		// names one means it.
		if err := kcp.Get(ctx, key, &corev1.Secret{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "", fmt.Errorf("the registry credentials Secret %s does not exist: name the operator's --registry-credentials-secret, in --namespace", key)
			}
			return nil, "", fmt.Errorf("reading the registry credentials Secret %s: %w", key, err)
		}
		return fetch.NewSecretKeychain(kcp, key), "logged in with the Secret " + key.String(), nil
	case c.DockerConfig != "":
		kc, err := dockerConfigKeychain(ctx, c.DockerConfig)
		return kc, "logged in with the docker config " + c.DockerConfig, err
	case c.Username != "":
		if c.Password == "" {
			return nil, "", fmt.Errorf("--registry-username without a password: set $%s or pipe it to --registry-password-stdin", PasswordEnv)
		}
		return staticKeychain{authn.FromConfig(authn.AuthConfig{Username: c.Username, Password: c.Password})}, "logged in as the user " + c.Username, nil
	}
	return authn.DefaultKeychain, "logged in with the docker default credentials", nil
}

// dockerConfigKeychain reads a docker config file through the same code as
// the operator's Secret, which has the same format.
func dockerConfigKeychain(ctx context.Context, path string) (authn.Keychain, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--docker-config: %w", err)
	}
	secret := corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: raw}}
	kc, err := kubernetes.NewFromPullSecrets(ctx, []corev1.Secret{secret})
	if err != nil {
		// The decoder's error may quote the file, which holds passwords.
		return nil, fmt.Errorf("--docker-config %s is not a docker config with auths (JSON, auths.<registry>.auth = base64(user:password))", path)
	}
	return kc, nil
}

// staticKeychain logs in to every registry as one user: lmctl backup talks
// to one registry only, the backups'.
type staticKeychain struct{ auth authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

// explainRefusal turns a registry's refusal to let lmctl in into what to
// give instead; other errors pass unchanged.
func explainRefusal(err error, repository, used string) error {
	status := 0
	var regErr *ociartifact.RegistryError
	var terr *transport.Error
	switch {
	case errors.As(err, &regErr):
		status = regErr.StatusCode
	case errors.As(err, &terr):
		status = terr.StatusCode
	}
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return err
	}
	return fmt.Errorf("the registry refused to let lmctl read %s %s (%d %s): give the credentials the operator pushes with: "+
		"--registry-credentials-secret NAME (the operator's Secret, read in --namespace), --docker-config FILE, "+
		"or --registry-username USER with the password in $%s or on stdin with --registry-password-stdin: %w",
		repository, used, status, http.StatusText(status), PasswordEnv, err)
}
