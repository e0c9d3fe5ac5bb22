// Package kubeconfig decides whether a runtime's kubeconfig is data the
// operator may use: inline credentials only (SPEC "Trust boundaries"). It is
// pure and small, apart from the clients built from its result, so that it
// can be table-tested and fuzzed on its own.
package kubeconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ErrRefused means a runtime's kubeconfig asks for more than inline
// credentials. A kubeconfig is data written by a provisioner; whatever in it
// would run a program, read a file of the operator's, route through a proxy
// or skip TLS verification would let that provisioner act with the
// operator's rights, so it is refused before any client is built.
var ErrRefused = errors.New("runtime kubeconfig refused")

// ErrUnparsable means the bytes are not a kubeconfig at all. It is kept apart
// from ErrRefused: nothing in it was refused, it is just not usable.
var ErrUnparsable = errors.New("does not parse as a kubeconfig (YAML or JSON)")

// inlineFix is what every refusal tells the provisioner to do instead.
const inlineFix = "put inline credentials in the user: a client certificate (client-certificate-data and client-key-data) or a token"

// maxListedProblems bounds how many refused fields one error names, so that a
// hostile kubeconfig cannot make the Kyma's condition arbitrarily long.
const maxListedProblems = 3

// FieldError names one refused field of a kubeconfig and says what to do. It
// never quotes the field's value: values may be credentials.
type FieldError struct {
	// Field is the path in the kubeconfig, such as users[0].user.exec.
	Field string
	// Problem says why it is refused and what to write instead.
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap makes every FieldError an ErrRefused.
func (e *FieldError) Unwrap() error { return ErrRefused }

// Kubeconfig is all the operator takes from a runtime's kubeconfig: the
// current context's server and the inline credentials of its user.
type Kubeconfig struct {
	// Server is the https URL of the runtime's API server.
	Server string
	// TLSServerName is the name the server certificate is verified against,
	// when it differs from the server's host.
	TLSServerName string
	// CAData are the PEM certificates the server certificate must chain to;
	// empty means the system roots.
	CAData []byte
	// CertData and KeyData are the PEM client certificate and key.
	CertData, KeyData []byte
	// Token is a bearer token.
	Token string
}

// Validate parses a runtime kubeconfig and accepts it only when
// every cluster and user in it holds nothing but inline material: an https
// server, certificate-authority-data, tls-server-name; client-certificate-data
// with client-key-data, or a token. It returns what the current context uses.
// Everything else that changes how a client behaves is refused with a
// *FieldError per field, joined, each naming the field and the fix (all
// ErrRefused). Bytes that are no kubeconfig at all give ErrUnparsable.
func Validate(raw []byte) (*Kubeconfig, error) {
	// Decoded as client-go decodes kubeconfigs: field names match exactly,
	// so that no differently-cased or repeated key can hide next to the one
	// that is checked.
	// The parser's message may quote the input, which holds credentials, so
	// it is not passed on.
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, ErrUnparsable
	}
	cfg := &clientcmdv1.Config{}
	strict, err := sigsjson.UnmarshalStrict(data, cfg)
	if err != nil {
		return nil, ErrUnparsable
	}
	var problems []*FieldError
	refuse := func(field, problem string) {
		problems = append(problems, &FieldError{Field: field, Problem: problem})
	}
	if !checkUnknownFields(data, refuse) && len(strict) > 0 {
		refuse("kubeconfig", "has a field that kubeconfig v1 does not define, or a field twice; remove it")
	}

	clusters := map[string]*clientcmdv1.Cluster{}
	for i := range cfg.Clusters {
		named := &cfg.Clusters[i]
		path := fmt.Sprintf("clusters[%d]", i)
		if _, dup := clusters[named.Name]; dup {
			refuse(path+".name", "duplicate cluster name; give each cluster its own name")
			continue
		}
		clusters[named.Name] = &named.Cluster
		checkCluster(path+".cluster", &named.Cluster, refuse)
	}
	users := map[string]*clientcmdv1.AuthInfo{}
	for i := range cfg.AuthInfos {
		named := &cfg.AuthInfos[i]
		path := fmt.Sprintf("users[%d]", i)
		if _, dup := users[named.Name]; dup {
			refuse(path+".name", "duplicate user name; give each user its own name")
			continue
		}
		users[named.Name] = &named.AuthInfo
		checkUser(path+".user", &named.AuthInfo, refuse)
	}
	contexts := map[string]*clientcmdv1.Context{}
	for i := range cfg.Contexts {
		named := &cfg.Contexts[i]
		if _, dup := contexts[named.Name]; dup {
			refuse(fmt.Sprintf("contexts[%d].name", i), "duplicate context name; give each context its own name")
			continue
		}
		contexts[named.Name] = &named.Context
	}

	cluster, user := currentContext(cfg.CurrentContext, contexts, clusters, users, refuse)
	if len(problems) > 0 {
		return nil, joinProblems(problems)
	}
	return &Kubeconfig{
		Server:        cluster.Server,
		TLSServerName: cluster.TLSServerName,
		CAData:        cluster.CertificateAuthorityData,
		CertData:      user.ClientCertificateData,
		KeyData:       user.ClientKeyData,
		Token:         user.Token,
	}, nil
}

// knownClusterFields and knownUserFields are the keys of a cluster and a user
// in kubeconfig v1, spelt exactly. Known fields that are refused get their own message;
// any other key is refused too, since a misspelt field that were silently
// ignored would change what the operator does (no CA, no credentials)
// without saying so.
var (
	knownClusterFields = fieldSet("server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority",
		"certificate-authority-data", "proxy-url", "disable-compression", "extensions")
	knownUserFields = fieldSet("client-certificate", "client-certificate-data", "client-key", "client-key-data", "token",
		"tokenFile", "as", "as-uid", "as-groups", "as-user-extra", "username", "password", "auth-provider", "exec", "extensions")
)

func fieldSet(names ...string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// checkUnknownFields refuses clusters and users with keys kubeconfig v1 does
// not have, and reports whether it refused any. The key is not quoted: a
// mangled file can turn a value into a key.
func checkUnknownFields(data []byte, refuse func(field, problem string)) bool {
	var doc struct {
		Clusters []struct {
			Cluster map[string]any `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User map[string]any `json:"user"`
		} `json:"users"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &doc); err != nil {
		return false // the typed decoding already said so
	}
	found := false
	for i, c := range doc.Clusters {
		if hasUnknown(c.Cluster, knownClusterFields) {
			found = true
			refuse(fmt.Sprintf("clusters[%d].cluster", i), "has a field that kubeconfig v1 does not define (misspelt?); "+
				"keep only server, certificate-authority-data and tls-server-name")
		}
	}
	for i, u := range doc.Users {
		if hasUnknown(u.User, knownUserFields) {
			found = true
			refuse(fmt.Sprintf("users[%d].user", i), "has a field that kubeconfig v1 does not define (misspelt?); "+
				"keep only client-certificate-data and client-key-data, or token")
		}
	}
	return found
}

func hasUnknown(fields map[string]any, known map[string]bool) bool {
	for k := range fields {
		if !known[k] {
			return true
		}
	}
	return false
}

// currentContext resolves the cluster and user that the current context
// names; it refuses a kubeconfig in which that chain is broken.
func currentContext(name string, contexts map[string]*clientcmdv1.Context, clusters map[string]*clientcmdv1.Cluster,
	users map[string]*clientcmdv1.AuthInfo, refuse func(field, problem string),
) (*clientcmdv1.Cluster, *clientcmdv1.AuthInfo) {
	if name == "" {
		refuse("current-context", "not set; set it to the context whose cluster and user the operator is to use")
		return nil, nil
	}
	ctx, ok := contexts[name]
	if !ok {
		refuse("current-context", "names no context in contexts; name one that exists")
		return nil, nil
	}
	cluster, ok := clusters[ctx.Cluster]
	if !ok {
		refuse("contexts["+quoteName(name)+"].context.cluster", "names no cluster in clusters; name one that exists")
	}
	user, ok := users[ctx.AuthInfo]
	if !ok {
		refuse("contexts["+quoteName(name)+"].context.user", "names no user in users; name one that exists and "+inlineFix)
	}
	return cluster, user
}

func checkCluster(path string, c *clientcmdv1.Cluster, refuse func(field, problem string)) {
	checkServer(path+".server", c.Server, refuse)
	if c.InsecureSkipTLSVerify {
		refuse(path+".insecure-skip-tls-verify", "TLS verification cannot be skipped; remove it and put the runtime's CA in certificate-authority-data")
	}
	if c.CertificateAuthority != "" {
		refuse(path+".certificate-authority", "file paths are refused (they would read the operator's files); put the PEM CA in certificate-authority-data instead")
	}
	if len(c.CertificateAuthorityData) > 0 {
		if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(c.CertificateAuthorityData) {
			refuse(path+".certificate-authority-data", "holds no PEM certificate; put the runtime's CA certificate there, PEM-encoded")
		}
	}
	if c.ProxyURL != "" {
		refuse(path+".proxy-url", "proxies are refused (they would route the operator's credentials elsewhere); remove it so that the operator connects to the server directly")
	}
	if c.DisableCompression {
		refuse(path+".disable-compression", "is not supported; remove it")
	}
}

func checkServer(field, server string, refuse func(field, problem string)) {
	if server == "" {
		refuse(field, "not set; set it to the https URL of the runtime's API server")
		return
	}
	u, err := url.Parse(server)
	switch {
	case err != nil || u.Host == "":
		refuse(field, "is not a URL; set it to the https URL of the runtime's API server")
	case u.Scheme != "https":
		refuse(field, "must use https, so that credentials never travel in clear text; set an https URL")
	case u.User != nil:
		refuse(field, "must not carry user info; put credentials in the user instead")
	case u.RawQuery != "" || u.Fragment != "":
		refuse(field, "must not have a query or fragment; set the plain https URL of the API server")
	}
}

func checkUser(path string, u *clientcmdv1.AuthInfo, refuse func(field, problem string)) {
	if u.Exec != nil {
		refuse(path+".exec", "exec plugins run a program inside the operator and are refused; remove it and "+inlineFix)
	}
	if u.AuthProvider != nil {
		refuse(path+".auth-provider", "auth-provider plugins are refused; remove it and "+inlineFix)
	}
	if u.TokenFile != "" {
		refuse(path+".tokenFile", "file paths are refused (they would read the operator's files, such as its own token); put the token inline in token instead")
	}
	if u.ClientCertificate != "" {
		refuse(path+".client-certificate", "file paths are refused (they would read the operator's files); put the PEM certificate in client-certificate-data instead")
	}
	if u.ClientKey != "" {
		refuse(path+".client-key", "file paths are refused (they would read the operator's files); put the PEM key in client-key-data instead")
	}
	if u.Username != "" || u.Password != "" {
		refuse(path+".username", "basic authentication is refused; remove username and password and "+inlineFix)
	}
	if u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0 {
		refuse(path+".as", "impersonation is refused (as, as-uid, as-groups, as-user-extra); remove it and give the user itself the rights the operator needs")
	}

	hasCert, hasKey := len(u.ClientCertificateData) > 0, len(u.ClientKeyData) > 0
	switch {
	case hasCert && !hasKey:
		refuse(path+".client-key-data", "missing; a client certificate needs its key in client-key-data")
	case hasKey && !hasCert:
		refuse(path+".client-certificate-data", "missing; a client key needs its certificate in client-certificate-data")
	case hasCert && hasKey:
		if _, err := tls.X509KeyPair(u.ClientCertificateData, u.ClientKeyData); err != nil {
			refuse(path+".client-certificate-data", "with client-key-data is not a valid PEM certificate and matching key; put a PEM client certificate and its key there")
		}
	case u.Token == "" && u.Exec == nil && u.AuthProvider == nil && u.TokenFile == "" &&
		u.ClientCertificate == "" && u.ClientKey == "" && u.Username == "" && u.Password == "":
		refuse(path, "has no credentials; "+inlineFix)
	}
}

// joinProblems makes one error of the refused fields, naming at most
// maxListedProblems of them.
func joinProblems(problems []*FieldError) error {
	errs := make([]error, 0, maxListedProblems+1)
	for i, p := range problems {
		if i == maxListedProblems {
			errs = append(errs, fmt.Errorf("%w: and %d more refused fields", ErrRefused, len(problems)-maxListedProblems))
			break
		}
		errs = append(errs, p)
	}
	return &refusal{errs: errs}
}

// refusal joins FieldErrors with "; " so that the message stays on one line
// in a condition.
type refusal struct{ errs []error }

func (r *refusal) Error() string {
	parts := make([]string, len(r.errs))
	for i, err := range r.errs {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (r *refusal) Unwrap() []error { return r.errs }

// quoteName keeps a context name usable in a field path; names are chosen by
// the provisioner and are not secret.
func quoteName(name string) string {
	const maxName = 63
	if len(name) > maxName {
		name = name[:maxName] + "..."
	}
	return fmt.Sprintf("%q", name)
}
