package backup

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

func TestSecretReferences(t *testing.T) {
	nested := func(levels int, name string) string {
		return "spec: " + strings.Repeat("{a: ", levels) + "{secretName: " + name + "}" + strings.Repeat("}", levels)
	}
	for _, tt := range []struct {
		name      string
		object    string
		namespace string
		want      []string
	}{
		{
			name:      "the conventions of Kubernetes' own APIs",
			namespace: "team-a",
			object: `
spec:
  tls: [{secretName: tls-cert}]
  tlsSecretName: other-cert
  volumes: [{secret: {secretName: vol}}]
  envFrom: [{secretRef: {name: env-all}}]
  env: [{valueFrom: {secretKeyRef: {name: env-one, key: password}}}]
  credentialsSecretRef: {name: creds}
  backendSecretKeyRef: {name: backend, key: k}
`,
			want: []string{"backend", "creds", "env-all", "env-one", "other-cert", "tls-cert", "vol"},
		},
		{
			name: "each name once, sorted", namespace: "team-a",
			object: "spec: {b: {secretName: x}, a: {secretRef: {name: x}}, c: [{secretName: a}]}",
			want:   []string{"a", "x"},
		},
		{
			name: "content outside spec counts, metadata and status do not", namespace: "team-a",
			object: "data: {secretName: in-data}\nmetadata: {secretName: in-meta}\nstatus: {secretRef: {name: in-status}}",
			want:   []string{"in-data"},
		},
		{
			name: "a reference to another namespace is not followed", namespace: "team-a",
			object: `
spec:
  a: {secretRef: {name: theirs, namespace: kube-system}}
  b: {secretName: theirs-too, secretNamespace: kube-system}
  c: {secretName: theirs-three, namespace: kube-system}
  d: {secretRef: {name: ours, namespace: team-a}}
  e: {secretName: ours-too, secretNamespace: ""}
  f: {secretRef: {name: odd-namespace, namespace: 7}}
`,
			want: []string{"ours", "ours-too"},
		},
		{
			name: "a cluster-scoped object's references are not followed", namespace: "",
			object: "spec: {secretRef: {name: s, namespace: kube-system}, secretName: t}",
			want:   nil,
		},
		{
			name: "names that are not Secret names are ignored", namespace: "team-a",
			object: `
spec:
  a: {secretName: "../../etc/passwd"}
  b: {secretName: ""}
  c: {secretName: "UPPER"}
  d: {secretName: 42}
  e: {secretName: {name: nested}}
  f: {secretRef: {name: [list]}}
  g: {secretRef: "not-a-map"}
  h: {secretName: "` + strings.Repeat("x", 254) + `"}
  i: {secretName: fine.name-1}
`,
			want: []string{"fine.name-1"},
		},
		{
			name: "field names match exactly, by suffix", namespace: "team-a",
			object: "spec: {secretname: a, SecretName: b, secretNames: [c], mySecretRefs: {name: d}, secret: {name: e}}",
			want:   []string{"b"},
		},
		{
			name: "depth is bounded", namespace: "team-a",
			object: nested(40, "too-deep"),
			want:   nil,
		},
		{
			name: "within the bound, deep is fine", namespace: "team-a",
			object: nested(20, "deep"),
			want:   []string{"deep"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			content := map[string]any{}
			g.Expect(yaml.Unmarshal([]byte(tt.object), &content)).To(Succeed())
			g.Expect(SecretReferences(content, tt.namespace)).To(Equal(tt.want))
		})
	}
}
