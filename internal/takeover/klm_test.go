package takeover_test

import (
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// TestManifestName pins KLM's name of a Manifest (pkg/module/common/
// module.go): <kyma>-<module>-fnv32a("kyma-project.io/module/<module>" +
// "<module>"); the hash here is computed independently.
func TestManifestName(t *testing.T) {
	if got, want := takeover.ManifestName("kyma-00001", "bench-alpha"), "kyma-00001-bench-alpha-2905229667"; got != want {
		t.Errorf("ManifestName = %q, want %q", got, want)
	}
}
