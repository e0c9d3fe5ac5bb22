package fleetbench

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// History is what the operation history (SPEC G4) recorded in a phase and
// what it cost: it rides on the Manifest status writes the phase makes
// anyway, so its cost shows as Manifest status writes per Manifest moved
// above the one each needs to report its result.
type History struct {
	// Operations counts the Manifests whose newest operation is the
	// phase's (an install or upgrade to the phase's version) and ended
	// Ready.
	Operations int `json:"operations"`
	// StatusWritesPerManifest is the phase's Manifest status writes over
	// the Manifests it moved.
	StatusWritesPerManifest float64 `json:"statusWritesPerManifest"`
}

// countHistory reads the Manifests and counts those whose newest operation
// took them to version and ended Ready. It runs after the phase's closing
// snapshot, so its List is not in the phase's figures. It reads them a page
// at a time: the benchmark shares its process with the operator, and one
// List of 200,000 Manifests held over 1 GiB at once (its body and the
// decoded list), which the operator's heap and RSS figures then carried.
func countHistory(ctx context.Context, c client.Reader, version string) (int, error) {
	n, next := 0, ""
	for {
		list := &v1beta2.ManifestList{}
		if err := c.List(ctx, list, client.InNamespace(namespace), client.Limit(historyPage),
			client.Continue(next), client.UnsafeDisableDeepCopy); err != nil {
			return 0, fmt.Errorf("listing Manifests for their history: %w", err)
		}
		for i := range list.Items {
			ops := list.Items[i].Status.Operations
			if len(ops) > 0 && ops[0].ToVersion == version && ops[0].Result == v1beta2.OperationReady &&
				(ops[0].Type == v1beta2.OperationInstall || ops[0].Type == v1beta2.OperationUpgrade) {
				n++
			}
		}
		if next = list.Continue; next == "" {
			return n, nil
		}
	}
}

// historyPage is how many Manifests countHistory reads per request.
const historyPage = 1000
