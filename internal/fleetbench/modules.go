package fleetbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// Versions the benchmark publishes of every module: the fleet installs the
// first and the fleet-wide upgrade moves the channel to the second.
const (
	installVersion = "1.0.0"
	upgradeVersion = "2.0.0"
	benchChannel   = v1beta2.DefaultChannel
)

// natoAlphabet supplies module names that pass the ModuleTemplate name
// pattern ^([a-z]{3,}(-[a-z]{3,})*)?$ — letters only, segments of three or
// more — which rules out numbered names such as bench-1.
var natoAlphabet = []string{
	"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
	"kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
	"uniform", "victor", "whiskey", "xray", "yankee", "zulu",
}

// maxModules is how many distinct names ModuleNames can make.
var maxModules = len(natoAlphabet) * (len(natoAlphabet) + 1)

// ModuleNames returns the names of the benchmark's m modules: bench-alpha …
// bench-zulu, then bench-alpha-alpha and so on.
func ModuleNames(m int) []string {
	names := make([]string, 0, m)
	for i := range m {
		name := "bench-" + natoAlphabet[i%len(natoAlphabet)]
		if i >= len(natoAlphabet) {
			name += "-" + natoAlphabet[i/len(natoAlphabet)-1]
		}
		names = append(names, name)
	}
	return names
}

// benchGroup is the API group of the custom resource every bench module
// ships. Its CRD is installed in each runtime API server before the load
// starts, so that the operator finds the kind in its REST mapper; no
// controller serves it, so a module is Ready as soon as it is applied.
const benchGroup = "fleetbench.runtime-fleet.dev"

const benchCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: benchmodules.` + benchGroup + `
spec:
  group: ` + benchGroup + `
  names:
    kind: BenchModule
    listKind: BenchModuleList
    plural: benchmodules
    singular: benchmodule
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
`

// writeBenchCRD writes the bench CRD into dir for testcluster to install.
func writeBenchCRD(dir string) (string, error) {
	path := filepath.Join(dir, "benchmodules.yaml")
	if err := os.WriteFile(path, []byte(benchCRD), 0o600); err != nil {
		return "", fmt.Errorf("writing the bench CRD: %w", err)
	}
	return path, nil
}

// moduleManifest is a bench module's whole content: one ConfigMap and one
// BenchModule, both without a namespace so that they land in each Kyma's
// sync namespace. The versions differ only in the ConfigMap's data, so an
// upgrade changes exactly one object per module in each runtime. The
// content is kept tiny on purpose: the benchmark measures the control
// plane, not payload size.
func moduleManifest(module, version string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s
data:
  module: %[1]s
  version: %[2]q
---
apiVersion: %[3]s/v1
kind: BenchModule
metadata:
  name: %[1]s
spec:
  module: %[1]s
`, module, version, benchGroup)
}

// publishModules pushes both versions of every module to the registry and
// creates their ModuleTemplates and ModuleReleaseMetas in the control plane,
// with the channel pointing at installVersion. The templates have neither
// spec.data nor spec.manager: readiness is "applied", with no module
// operator in the loop.
func publishModules(ctx context.Context, c client.Client, registryHost, namespace string, modules []string) error {
	for i, module := range modules {
		versions := []string{installVersion, upgradeVersion}
		if i == 0 {
			versions = append(versions, rolloutVersion) // for the rollout phase
		}
		for _, version := range versions {
			content := ociartifact.Module{RawManifest: moduleManifest(module, version)}
			artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/fleetbench/%s:%s", registryHost, module, version),
				content.Layers(), ociartifact.Insecure())
			if err != nil {
				return fmt.Errorf("pushing module %s %s: %w", module, version, err)
			}
			template := &v1beta2.ModuleTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: module + "-" + version, Namespace: namespace},
				Spec: v1beta2.ModuleTemplateSpec{
					ModuleName: module,
					Version:    version,
					Resources: []v1beta2.ContentResource{{
						Name: v1beta2.RawManifestResourceName,
						Link: artifact.Links[v1beta2.RawManifestResourceName],
					}},
				},
			}
			if err := c.Create(ctx, template); err != nil {
				return fmt.Errorf("creating ModuleTemplate %s: %w", template.Name, err)
			}
		}
		if err := createReleaseMeta(ctx, c, namespace, module); err != nil {
			return err
		}
	}
	return nil
}

// createReleaseMeta puts a module's channel on the version the install
// phase installs.
func createReleaseMeta(ctx context.Context, c client.Client, namespace, module string) error {
	meta := &v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Name: module, Namespace: namespace},
		Spec: v1beta2.ModuleReleaseMetaSpec{
			ModuleName: module,
			Channels:   []v1beta2.ChannelVersionAssignment{{Channel: benchChannel, Version: installVersion}},
		},
	}
	if err := c.Create(ctx, meta); err != nil {
		return fmt.Errorf("creating ModuleReleaseMeta %s: %w", meta.Name, err)
	}
	return nil
}
