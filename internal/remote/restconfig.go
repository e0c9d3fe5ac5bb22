package remote

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
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

// httpClientFor is rest.HTTPClientFor with TLS sessions kept in sessions:
// a connection built again after an idle close resumes the last session
// (TLS 1.3 PSK) instead of a full handshake, which spares the operator the
// verification of the server's chain and the signature with the client key
// at every look at an idle runtime. The transport is otherwise client-go's:
// the same dialer, timeouts, HTTP/2 settings and wrappers (authentication,
// user agent). observe, when set, sees each handshake (tests).
func httpClientFor(cfg *rest.Config, sessions tls.ClientSessionCache, observe func(tls.ConnectionState)) (*http.Client, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	if tlsConfig == nil {
		// A plain-HTTP server; nothing to resume.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsConfig.ClientSessionCache = sessions
	if observe != nil {
		tlsConfig.VerifyConnection = func(state tls.ConnectionState) error {
			observe(state)
			return nil
		}
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	transport := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               cfg.Proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         dialer.DialContext,
		DisableCompression:  cfg.DisableCompression,
	})
	wrapped, err := rest.HTTPWrappersForConfig(cfg, transport)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: wrapped, Timeout: cfg.Timeout}, nil
}

// RESTConfig is the client configuration of a runtime kubeconfig, accepted
// on the same terms as the operator's (kubeconfig.Validate): for tools
// such as lmctl that reach a runtime through its registration Secret.
func RESTConfig(raw []byte) (*rest.Config, error) {
	k, err := kubeconfig.Validate(raw)
	if err != nil {
		return nil, err
	}
	return restConfig(k), nil
}
