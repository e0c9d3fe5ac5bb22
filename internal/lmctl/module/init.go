package module

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation"

	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
)

// Init scaffolds a new module repository named name at dir from the
// template operator's files (module.yaml, the kustomization with CRD, RBAC
// and manager, the default CR, a README), with the template's name replaced
// by name throughout (resource names, the CRD's group). dir must not exist
// or be empty. It returns the files written, relative to dir.
func Init(dir, name string) ([]string, error) {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return nil, fmt.Errorf("module name %q: %v", name, msgs)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s is not empty: scaffold a module into a new directory", dir)
	}
	var written []string
	err := fs.WalkDir(templateoperator.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(templateoperator.Files, p)
		if err != nil {
			return err
		}
		data = bytes.ReplaceAll(data, []byte(templateoperator.Name), []byte(name))
		written = append(written, p)
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return written, fmt.Errorf("scaffolding %s: %w", dir, err)
	}
	return written, nil
}
