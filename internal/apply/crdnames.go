package apply

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RepairStaleNamesAccepted clears a NamesAccepted=False condition that the
// API server will never clear itself, on each CRD named: one whose spec
// names are exactly the names it accepted. The API server's naming
// controller skips a CRD whose spec and accepted names are equal, so a
// condition set False by an earlier spec (our Kyma CRD's former short name
// "kyma", applied over a CRD that never had it, is "already in use") stays
// False after the spec that caused it is gone, and the CRD counts as
// stalled for ever. With the names equal, nothing conflicts: the condition
// is what the naming controller would have written. It reports whether it
// repaired any.
func RepairStaleNamesAccepted(ctx context.Context, c client.Client, names ...string) (bool, error) {
	repaired := false
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return repaired, err
		}
		i := namesAccepted(crd)
		if i < 0 || crd.Status.Conditions[i].Status != apiextensionsv1.ConditionFalse ||
			!equality.Semantic.DeepEqual(crd.Spec.Names, crd.Status.AcceptedNames) {
			continue
		}
		crd.Status.Conditions[i] = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue,
			Reason: "NoConflicts", Message: "no conflicts found", LastTransitionTime: metav1.Now(),
		}
		// Update carries the resourceVersion read: a change meanwhile is
		// a conflict, and the naming controller's word stands.
		if err := c.Status().Update(ctx, crd, client.FieldOwner(FieldManager)); err != nil {
			return repaired, fmt.Errorf("clearing the stale NamesAccepted condition of CRD %s: %w", name, err)
		}
		repaired = true
	}
	return repaired, nil
}

func namesAccepted(crd *apiextensionsv1.CustomResourceDefinition) int {
	for i, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted {
			return i
		}
	}
	return -1
}
