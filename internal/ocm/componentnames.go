package ocm

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// ReleaseMetaComponents names a template's component as KLM does: the
// spec.ocmComponentName of the module's ModuleReleaseMeta in the
// template's namespace (the one the Kyma controller resolves the module
// through: resolve.NewCatalog's, the first by name when two claim it).
type ReleaseMetaComponents struct {
	Reader client.Reader
}

// ComponentName implements ComponentNames.
func (c ReleaseMetaComponents) ComponentName(ctx context.Context, template *v1beta2.ModuleTemplate) (string, string, error) {
	module := resolve.ModuleName(template)
	metas := &v1beta2.ModuleReleaseMetaList{}
	if err := c.Reader.List(ctx, metas, client.InNamespace(template.Namespace)); err != nil {
		return "", "", fmt.Errorf("listing ModuleReleaseMetas: %w", err)
	}
	meta, ok := resolve.NewCatalog(nil, metas.Items).ReleaseMeta(module)
	if !ok {
		return "", "", nil
	}
	return meta.Spec.OcmComponentName, fmt.Sprintf("ModuleReleaseMeta %q", meta.Name), nil
}
