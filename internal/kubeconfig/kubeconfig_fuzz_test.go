package kubeconfig

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzValidateKubeconfig feeds the validator arbitrary kubeconfigs, seeded
// with valid and hostile ones. Whatever it is given, it must not panic, and
// what it accepts must be inline material only: an https server, inline
// credentials, and no cluster or user key outside the accepted ones.
func FuzzValidateKubeconfig(f *testing.F) {
	cert, key := testPEM()
	server := "server: https://127.0.0.1:6443\ncertificate-authority-data: " + b64(cert)
	for _, seed := range [][]byte{
		kubeconfig(server, "client-certificate-data: "+b64(cert)+"\nclient-key-data: "+b64(key)),
		kubeconfig(server, "token: abc"),
		kubeconfig(server, "exec: {command: sh, args: [-c, 'touch /tmp/pwned']}"),
		kubeconfig(server, "auth-provider: {name: gcp}"),
		kubeconfig(server, "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"),
		kubeconfig("server: https://127.0.0.1:6443\ninsecure-skip-tls-verify: true", "token: abc"),
		kubeconfig(server+"\nproxy-url: socks5://10.0.0.1:1080", "token: abc"),
		kubeconfig("server: http://127.0.0.1:8080", "token: abc"),
		kubeconfig(server, "as: system:admin\ntoken: abc"),
		[]byte(`{"apiVersion":"v1","clusters":[{"name":"a","cluster":{"server":"https://h"}}],"users":[{"name":"a","user":{"token":"t"}}],"contexts":[{"name":"a","context":{"cluster":"a","user":"a"}}],"current-context":"a"}`),
		[]byte("current-context: x\ncontexts: [{name: x, context: {cluster: x, user: x}}, {name: x}]"),
		[]byte("a: &a [*a, *a]"),
		{},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Validate(raw)
		if err != nil {
			if !errors.Is(err, ErrRefused) && !errors.Is(err, ErrUnparsable) {
				t.Fatalf("error is neither ErrRefused nor ErrUnparsable: %v", err)
			}
			return
		}
		u, perr := url.Parse(got.Server)
		if perr != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			t.Fatalf("accepted server %q", got.Server)
		}
		if got.Token == "" && (len(got.CertData) == 0 || len(got.KeyData) == 0) {
			t.Fatalf("accepted a kubeconfig without inline credentials")
		}
		checkOnlyInlineKeys(t, raw)
	})
}

// allowedKeys are the keys a cluster or user may set to a non-zero value.
var allowedKeys = map[string]bool{
	"server": true, "certificate-authority-data": true, "tls-server-name": true, "extensions": true,
	"client-certificate-data": true, "client-key-data": true, "token": true,
}

// checkOnlyInlineKeys is an oracle apart from the validator: it reads an
// accepted kubeconfig as plain YAML and fails when any cluster or user sets
// a key outside allowedKeys, under any spelling of clusters or users.
func checkOnlyInlineKeys(t *testing.T, raw []byte) {
	t.Helper()
	doc := map[string]any{}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("accepted a kubeconfig that does not parse as YAML: %v", err)
	}
	for key, list := range doc {
		var body string
		switch strings.ToLower(key) {
		case "clusters":
			body = "cluster"
		case "users":
			body = "user"
		default:
			continue
		}
		entries, _ := list.([]any)
		for _, e := range entries {
			entry, _ := e.(map[string]any)
			for k, v := range entry {
				if !strings.EqualFold(k, body) {
					continue
				}
				fields, _ := v.(map[string]any)
				for _, plugin := range []string{"exec", "auth-provider"} {
					if _, ok := fields[plugin]; ok && fields[plugin] != nil {
						t.Fatalf("accepted a kubeconfig whose %s sets %s", body, plugin)
					}
				}
				for field, value := range fields {
					if !allowedKeys[field] && !zero(value) {
						t.Fatalf("accepted a kubeconfig whose %s sets %s", body, field)
					}
				}
			}
		}
	}
}

func zero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	default:
		return false
	}
}
