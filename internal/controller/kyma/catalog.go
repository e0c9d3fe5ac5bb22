package kyma

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// catalogSnapshot keeps one resolve.Catalog for all Kymas and rebuilds it
// only after a ModuleTemplate or ModuleReleaseMeta changed. With thousands of
// Kymas sharing a catalog of a few hundred templates, listing and indexing the
// catalog per Kyma reconcile would dominate the operator's CPU.
type catalogSnapshot struct {
	reader    client.Reader
	namespace string

	mu      sync.Mutex
	catalog resolve.Catalog
	stale   bool
}

func newCatalogSnapshot(reader client.Reader, namespace string) *catalogSnapshot {
	return &catalogSnapshot{reader: reader, namespace: namespace, stale: true}
}

// invalidate marks the snapshot stale; the next get rebuilds it.
func (s *catalogSnapshot) invalidate() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
}

func (s *catalogSnapshot) get(ctx context.Context) (resolve.Catalog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stale && s.catalog != nil {
		return s.catalog, nil
	}
	templates := &v1beta2.ModuleTemplateList{}
	if err := s.reader.List(ctx, templates, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("listing ModuleTemplates: %w", err)
	}
	metas := &v1beta2.ModuleReleaseMetaList{}
	if err := s.reader.List(ctx, metas, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("listing ModuleReleaseMetas: %w", err)
	}
	s.catalog = resolve.NewCatalog(templates.Items, metas.Items)
	s.stale = false
	return s.catalog, nil
}
