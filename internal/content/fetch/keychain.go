package fetch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// DockerConfigKeychain returns registry credentials from the content of a
// kubernetes.io/dockerconfigjson Secret (its .dockerconfigjson key), the form
// in which registry credentials are handed to the operator. Registries the
// Secret does not name are read anonymously.
func DockerConfigKeychain(dockerConfigJSON []byte) (authn.Keychain, error) {
	var cfg struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	// The decoder's errors name fields and offsets, never values, so no
	// credential ends up in the error.
	if err := json.Unmarshal(dockerConfigJSON, &cfg); err != nil {
		return nil, fmt.Errorf("reading dockerconfigjson: %w", err)
	}
	if len(cfg.Auths) == 0 {
		return nil, errors.New("reading dockerconfigjson: no auths")
	}
	k := dockerConfigKeychain{}
	for server, auth := range cfg.Auths {
		k[registryHost(server)] = auth
	}
	return k, nil
}

// dockerConfigKeychain maps registry hosts to credentials.
type dockerConfigKeychain map[string]authn.AuthConfig

func (k dockerConfigKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if auth, ok := k[r.RegistryStr()]; ok {
		return authn.FromConfig(auth), nil
	}
	return authn.Anonymous, nil
}

// registryHost turns a docker config server key, which may be written as a
// URL (https://index.docker.io/v1/), into the registry host as references
// name it (Docker Hub is index.docker.io there).
func registryHost(server string) string {
	if _, rest, ok := strings.Cut(server, "://"); ok {
		server = rest
	}
	host, _, _ := strings.Cut(server, "/")
	if host == "docker.io" {
		return name.DefaultRegistry
	}
	return host
}
