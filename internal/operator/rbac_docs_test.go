package operator_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// The rights table of docs/install.md names every right of the operator's
// Roles (config/rbac/role.yaml, generated from rbac.go): each resource with
// each of its verbs, in the row of its namespace. A right added to rbac.go
// and not to the table fails here, as ModuleRollouts and RuntimeBackups once
// went missing from it.
func TestInstallDocsNameEveryRight(t *testing.T) {
	const root = "../.."
	roleYAML, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := rightsRows(string(docs))
	objs, err := render.Raw(roleYAML)
	if err != nil {
		t.Fatal(err)
	}
	roles := 0
	for _, obj := range objs {
		if obj.GetKind() != "Role" {
			continue
		}
		roles++
		row, ok := rows["the operator's namespace"]
		if obj.GetNamespace() != "kcp-system" {
			row, ok = rows["the PKI namespace"]
		}
		if !ok {
			t.Fatalf("docs/install.md has no rights row for the Role in %s", obj.GetNamespace())
		}
		raw, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		role := &rbacv1.Role{}
		if err := yaml.Unmarshal(raw, role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			for _, resource := range rule.Resources {
				said := rightsOf(row, resource)
				if said == "" {
					t.Errorf("docs/install.md does not name %s (namespace %s) in its rights table", resource, obj.GetNamespace())
					continue
				}
				for _, verb := range rule.Verbs {
					if !regexp.MustCompile(`\b` + verb + `\b`).MatchString(said) {
						t.Errorf("docs/install.md names %s (namespace %s) without %s: %q", resource, obj.GetNamespace(), verb, said)
					}
				}
			}
		}
	}
	if roles == 0 {
		t.Fatal("config/rbac/role.yaml has no Role")
	}
}

// rightsRows are the rows of the rights table by their first cell.
func rightsRows(markdown string) map[string]string {
	rows := map[string]string{}
	for line := range strings.SplitSeq(markdown, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 4 && strings.TrimSpace(cells[0]) == "" {
			rows[strings.TrimSpace(cells[1])] = cells[2]
		}
	}
	return rows
}

// rightsOf is what a row says of a resource: for "kymas", the text after
// "Kymas:" up to its first subresource; for "kymas/status", the text after
// "`kymas/status`". Entries are separated by "; ".
func rightsOf(row, resource string) string {
	for entry := range strings.SplitSeq(row, "; ") {
		if strings.Contains(resource, "/") {
			if _, after, ok := strings.Cut(entry, "`"+resource+"`"); ok {
				before, _, _ := strings.Cut(after, "`")
				return before
			}
			continue
		}
		label, rights, ok := strings.Cut(entry, ":")
		if ok && strings.Contains(strings.ToLower(label), resource) {
			before, _, _ := strings.Cut(rights, "`")
			return before
		}
	}
	return ""
}
