package kubeconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

// testPEM is a self-signed certificate and its key, made once per test
// binary: the validator checks that client-certificate-data and
// client-key-data really are a pair.
var testPEM = func() (cert, key []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// secretToken stands for a credential: no error may quote it.
const secretToken = "s3cr3t-t0ken-value"

// kubeconfig writes a kubeconfig with one cluster, one user and one current
// context; cluster and user are the YAML bodies given.
func kubeconfig(cluster, user string) []byte {
	return []byte(`apiVersion: v1
kind: Config
current-context: rt
contexts:
- name: rt
  context: {cluster: rt, user: rt}
clusters:
- name: rt
  cluster:
` + indent(cluster) + `
users:
- name: rt
  user:
` + indent(user))
}

func indent(body string) string {
	lines := strings.Split(strings.TrimSpace(body), "\n")
	for i := range lines {
		lines[i] = "    " + lines[i]
	}
	return strings.Join(lines, "\n")
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestValidate(t *testing.T) {
	cert, key := testPEM()
	server := "server: https://127.0.0.1:6443\ncertificate-authority-data: " + b64(cert)
	certUser := "client-certificate-data: " + b64(cert) + "\nclient-key-data: " + b64(key)
	tokenUser := "token: " + secretToken

	tests := []struct {
		name   string
		raw    []byte
		fields []string // refused fields, in order; none means accepted
	}{
		{name: "client certificate", raw: kubeconfig(server, certUser)},
		{name: "token", raw: kubeconfig(server, tokenUser)},
		{name: "token and tls-server-name, system roots", raw: kubeconfig("server: https://api.example.com:443/prefix\ntls-server-name: api.internal", tokenUser)},
		{name: "exec plugin", raw: kubeconfig(server, "exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, 'touch /tmp/x']}"), fields: []string{"users[0].user.exec"}},
		{name: "auth-provider", raw: kubeconfig(server, "auth-provider: {name: oidc, config: {id-token: "+secretToken+"}}"), fields: []string{"users[0].user.auth-provider"}},
		{name: "tokenFile", raw: kubeconfig(server, "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"), fields: []string{"users[0].user.tokenFile"}},
		{name: "client certificate file", raw: kubeconfig(server, "client-certificate: /etc/cert.pem\nclient-key-data: "+b64(key)), fields: []string{"users[0].user.client-certificate", "users[0].user.client-certificate-data"}},
		{name: "client key file", raw: kubeconfig(server, "client-certificate-data: "+b64(cert)+"\nclient-key: /etc/key.pem"), fields: []string{"users[0].user.client-key", "users[0].user.client-key-data"}},
		{name: "CA file", raw: kubeconfig("server: https://127.0.0.1:6443\ncertificate-authority: /etc/ca.pem", tokenUser), fields: []string{"clusters[0].cluster.certificate-authority"}},
		{name: "proxy-url", raw: kubeconfig(server+"\nproxy-url: http://10.0.0.1:3128", tokenUser), fields: []string{"clusters[0].cluster.proxy-url"}},
		{name: "insecure-skip-tls-verify", raw: kubeconfig("server: https://127.0.0.1:6443\ninsecure-skip-tls-verify: true", tokenUser), fields: []string{"clusters[0].cluster.insecure-skip-tls-verify"}},
		{name: "plain http server", raw: kubeconfig("server: http://127.0.0.1:8080", tokenUser), fields: []string{"clusters[0].cluster.server"}},
		{name: "no server", raw: kubeconfig("certificate-authority-data: "+b64(cert), tokenUser), fields: []string{"clusters[0].cluster.server"}},
		{name: "user info in server", raw: kubeconfig("server: https://admin:"+secretToken+"@127.0.0.1:6443", tokenUser), fields: []string{"clusters[0].cluster.server"}},
		{name: "basic auth", raw: kubeconfig(server, "username: admin\npassword: "+secretToken), fields: []string{"users[0].user.username"}},
		{name: "impersonation", raw: kubeconfig(server, tokenUser+"\nas: system:admin\nas-groups: [system:masters]"), fields: []string{"users[0].user.as"}},
		{name: "no credentials", raw: kubeconfig(server, "{}"), fields: []string{"users[0].user"}},
		{name: "certificate without key", raw: kubeconfig(server, "client-certificate-data: "+b64(cert)), fields: []string{"users[0].user.client-key-data"}},
		{name: "key that does not match", raw: kubeconfig(server, "client-certificate-data: "+b64(cert)+"\nclient-key-data: "+b64([]byte("not a key"))), fields: []string{"users[0].user.client-certificate-data"}},
		{name: "CA data that is not PEM", raw: kubeconfig("server: https://127.0.0.1:6443\ncertificate-authority-data: "+b64([]byte("junk")), tokenUser), fields: []string{"clusters[0].cluster.certificate-authority-data"}},
		{name: "disable-compression", raw: kubeconfig(server+"\ndisable-compression: true", tokenUser), fields: []string{"clusters[0].cluster.disable-compression"}},
		{name: "no current context", raw: []byte(strings.Replace(string(kubeconfig(server, tokenUser)), "current-context: rt", "", 1)), fields: []string{"current-context"}},
		{name: "current context missing", raw: []byte(strings.Replace(string(kubeconfig(server, tokenUser)), "current-context: rt", "current-context: other", 1)), fields: []string{"current-context"}},
		{name: "context names missing user", raw: []byte(strings.Replace(string(kubeconfig(server, tokenUser)), "user: rt}", "user: ghost}", 1)), fields: []string{`contexts["rt"].context.user`}},
		{
			name: "hostile user that the current context does not use",
			raw: append(kubeconfig(server, tokenUser), []byte(`
- name: other
  user:
    exec: {command: sh}`)...),
			fields: []string{"users[1].user.exec"},
		},
		{name: "misspelt field", raw: kubeconfig(server+"\ncertificate-authority-date: "+b64(cert), tokenUser), fields: []string{"clusters[0].cluster"}},
		{name: "unknown user field", raw: kubeconfig(server, tokenUser+"\ntoken-file: /t"), fields: []string{"users[0].user"}},
		{name: "upper-case exec is not exec, and refused", raw: kubeconfig(server, tokenUser+"\nEXEC: {command: sh}"), fields: []string{"users[0].user"}},
		{name: "differently-cased clusters list", raw: append(kubeconfig(server, tokenUser), []byte("\nCLUSTERS: [{name: rt, cluster: {server: 'https://h', insecure-skip-tls-verify: true}}]")...), fields: []string{"kubeconfig"}},
		{name: "not YAML", raw: []byte("{{{" + secretToken), fields: []string{"unparsable"}},
		{name: "not a kubeconfig", raw: []byte("this is not a kubeconfig"), fields: []string{"unparsable"}},
		{name: "empty", raw: nil, fields: []string{"current-context"}},
		{
			name:   "many problems are capped",
			raw:    kubeconfig("server: http://x\ninsecure-skip-tls-verify: true\nproxy-url: http://p\ncertificate-authority: /ca", "exec: {command: sh}\ntokenFile: /t"),
			fields: []string{"clusters[0].cluster.server", "clusters[0].cluster.insecure-skip-tls-verify", "clusters[0].cluster.certificate-authority"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Validate(tt.raw)
			if len(tt.fields) == 0 {
				if err != nil {
					t.Fatalf("refused a valid kubeconfig: %v", err)
				}
				if !strings.HasPrefix(got.Server, "https://") {
					t.Fatalf("server %q", got.Server)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want %v refused", tt.fields)
			}
			if tt.fields[0] == "unparsable" {
				if !errors.Is(err, ErrUnparsable) || strings.Contains(err.Error(), secretToken) {
					t.Fatalf("error %v, want ErrUnparsable without quoting the input", err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v is not ErrRefused", err)
			}
			var refused []string
			collectFields(err, &refused)
			if strings.Join(refused, ",") != strings.Join(tt.fields, ",") {
				t.Fatalf("refused fields %v, want %v (error: %v)", refused, tt.fields, err)
			}
			if strings.Contains(err.Error(), secretToken) || strings.Contains(err.Error(), b64(key)) {
				t.Fatalf("error quotes a credential: %v", err)
			}
		})
	}
}

// collectFields lists the fields named by the FieldErrors in err, in order.
func collectFields(err error, out *[]string) {
	if fe, ok := err.(*FieldError); ok { //nolint:errorlint // walking the tree by hand, one level at a time
		*out = append(*out, fe.Field)
		return
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			collectFields(e, out)
		}
	}
}

func TestValidateKubeconfigMessageSaysWhatToDo(t *testing.T) {
	cert, _ := testPEM()
	_, err := Validate(kubeconfig("server: https://h\ncertificate-authority-data: "+b64(cert), "exec: {command: sh}"))
	if err == nil || !strings.Contains(err.Error(), "users[0].user.exec") || !strings.Contains(err.Error(), "client-certificate-data") || !strings.Contains(err.Error(), "token") {
		t.Fatalf("message does not name the field and the fix: %v", err)
	}
}
