package access

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MinTokenTTL is the shortest token lifetime the API server issues.
const MinTokenTTL = 10 * time.Minute

// Token is a kubeconfig that reaches the runtime as the identity.
type Token struct {
	Kubeconfig []byte
	Expires    time.Time
}

// IssueToken asks the runtime for a token of the identity, valid for ttl,
// and makes a kubeconfig of it for the server and certificate authority of
// cfg, the runtime's admin connection; nothing else of cfg (the admin's
// credential) goes into it. Each token is independent: one issued earlier
// stays valid until it expires, so that whoever still uses it while the
// new one is handed out sees no outage; all of them stop working when the
// ServiceAccount is removed.
func IssueToken(ctx context.Context, admin client.Client, cfg *rest.Config, id Identity, ttl time.Duration) (Token, error) {
	seconds := int64(max(ttl, MinTokenTTL) / time.Second)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: id.ServiceAccount(), Namespace: ServiceAccountNamespace}}
	if err := admin.SubResource("token").Create(ctx, sa, request); err != nil {
		return Token{}, fmt.Errorf("requesting a token for ServiceAccount %s: %w", id, err)
	}
	config := clientcmdapi.NewConfig()
	config.Clusters["runtime"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
	}
	config.AuthInfos[id.Module] = &clientcmdapi.AuthInfo{Token: request.Status.Token}
	config.Contexts[id.Module] = &clientcmdapi.Context{Cluster: "runtime", AuthInfo: id.Module, Namespace: id.Namespace}
	config.CurrentContext = id.Module
	raw, err := clientcmd.Write(*config)
	if err != nil {
		return Token{}, fmt.Errorf("writing the kubeconfig of ServiceAccount %s: %w", id, err)
	}
	return Token{Kubeconfig: raw, Expires: request.Status.ExpirationTimestamp.Time}, nil
}
