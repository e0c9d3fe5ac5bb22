package remote

import (
	"net/http"
	"net/url"

	"k8s.io/client-go/rest"

	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
)

// ErrKubeconfigRefused means a runtime's kubeconfig asks for more than inline
// credentials; see kubeconfig.Validate.
var ErrKubeconfigRefused = kubeconfig.ErrRefused

// restConfig builds a client configuration from a validated kubeconfig's
// fields only: no environment, no files, no plugins. A nil rest.Config.Proxy
// would mean the HTTP(S)_PROXY environment, so the proxy is set to none
// explicitly.
func restConfig(k *kubeconfig.Kubeconfig) *rest.Config {
	return &rest.Config{
		Host:        k.Server,
		BearerToken: k.Token,
		Proxy:       noProxy,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: k.TLSServerName,
			CAData:     append([]byte(nil), k.CAData...),
			CertData:   append([]byte(nil), k.CertData...),
			KeyData:    append([]byte(nil), k.KeyData...),
		},
	}
}

// noProxy connects directly, whatever the environment says.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil } //nolint:nilnil // nil URL means no proxy
