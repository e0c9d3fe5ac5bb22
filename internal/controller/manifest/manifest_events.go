package manifest

import "github.com/runtime-fleet/lifecycle-manager/api/v1beta2"

// ReasonDriftCorrected is the reason of the Normal event of a reconcile that
// found the runtime changed under an installed module and applied the
// module's resources again.
const ReasonDriftCorrected = "DriftCorrected"

// installed tells whether the Manifest's current spec was already carried
// out once (its status records this generation and an inventory; a
// Manifest Stalled on an ownership conflict has applied nothing), so that
// what a reconcile writes now corrects drift rather than installs or
// upgrades. A first install or an upgrade gets no event per Manifest: the
// Kyma reports it in one event for all its modules.
func installed(manifest *v1beta2.Manifest) bool {
	return manifest.Generation != 0 && manifest.Status.ObservedGeneration == manifest.Generation && len(manifest.Status.Synced) > 0
}
