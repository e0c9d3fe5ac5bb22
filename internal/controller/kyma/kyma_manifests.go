package kyma

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
)

// templateRevisionAnnotation records which ModuleTemplate revision a
// Manifest's pinned links came from, so links are pinned once per template
// change rather than once per reconcile.
const templateRevisionAnnotation = "operator.kyma-project.io/template-revision"

// fieldManager writes Manifests; the Manifest controller writes their status
// under its own manager.
const fieldManager = "lifecycle-manager-kyma"

// ManifestName is the deterministic name of a Kyma's Manifest for a module.
// Names longer than a label allows are shortened with a hash so they stay
// unique and stable. It is exported for the runtime watcher, which requeues
// the Manifest of a module whose resource changed in a runtime.
func ManifestName(kymaName, module string) string {
	name := kymaName + "-" + module
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:52] + "-" + hex.EncodeToString(sum[:])[:10]
}

// syncManifest makes the module's Manifest match what it resolved to, and
// records what it changed in changes. A module that did not resolve keeps
// its Manifest untouched: what is installed stays installed. A Manifest
// being deleted is left to go (the API server would refuse its finalizer
// anew); once gone, the next reconcile creates it again if still wanted.
func (r *Reconciler) syncManifest(ctx context.Context, kyma *v1beta2.Kyma, module *resolve.Module, existing *v1beta2.Manifest, changes *moduleChanges) error {
	if !module.Spec.Managed {
		if existing != nil {
			return r.deleteManifest(ctx, existing, true, changes)
		}
		return nil
	}
	if !module.Installable() || (existing != nil && !existing.DeletionTimestamp.IsZero()) {
		return nil
	}

	desired, err := r.desiredManifest(ctx, kyma, module, existing)
	if err != nil {
		return err
	}
	if existing != nil && manifestUpToDate(kyma, existing, desired) {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return fmt.Errorf("encoding Manifest %s: %w", desired.Name, err)
	}
	apply := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := r.Apply(ctx, apply, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing Manifest %s: %w", desired.Name, err)
	}
	if existing == nil {
		changes.install(module.Name, module.Version)
	} else if existing.Spec.Version != desired.Spec.Version {
		changes.upgrade(module.Name, existing.Spec.Version, desired.Spec.Version)
	}
	return nil
}

func (r *Reconciler) desiredManifest(ctx context.Context, kyma *v1beta2.Kyma, module *resolve.Module, existing *v1beta2.Manifest) (*v1beta2.Manifest, error) {
	template := module.Template
	revision := string(template.UID) + "/" + template.ResourceVersion

	resources, err := r.pinnedResources(ctx, template, revision, existing, module.Pinned)
	if err != nil {
		return nil, err
	}
	images, err := r.localizedImages(ctx, template, revision, existing)
	if err != nil {
		return nil, err
	}

	m := &v1beta2.Manifest{
		TypeMeta: metav1.TypeMeta{APIVersion: v1beta2.GroupVersion.String(), Kind: "Manifest"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ManifestName(kyma.Name, module.Name),
			Namespace: kyma.Namespace,
			Labels: map[string]string{
				v1beta2.KymaNameLabel:   kyma.Name,
				v1beta2.ModuleNameLabel: module.Name,
				v1beta2.ManagedByLabel:  v1beta2.ManagedByValue,
				// Created filed under its Kyma's shard bucket, so that
				// with shards it reaches its shard's informers alone.
				v1beta2.ShardBucketLabel: strconv.Itoa(shard.Bucket(kyma.Name)),
			},
			Annotations: map[string]string{templateRevisionAnnotation: revision},
			// Created with the Manifest controller's finalizer, which it
			// would otherwise add in a second write.
			Finalizers: []string{v1beta2.ManifestFinalizer},
		},
		Spec: v1beta2.ManifestSpec{
			Remote:               true,
			Version:              module.Version,
			ModuleName:           module.Name,
			Resources:            resources,
			CustomResourcePolicy: module.Spec.CustomResourcePolicy,
			Manager:              template.Spec.Manager.DeepCopy(),
			Debug:                debugEnabled(kyma, module.Spec),
			SyncNamespace:        kyma.Spec.SyncNamespace,
			RBAC:                 template.Spec.RBAC.DeepCopy(),
			OperatorKubeconfig:   template.Spec.Target == v1beta2.TargetControlPlane,
			LocalizedImages:      images,
		},
	}
	if hasHelmChart(template) {
		// A chart module's spec.data holds its values (its spec), not a
		// custom resource to create; the Kyma's module entry may override
		// them.
		values, err := chartValues(template, module.Spec)
		if err != nil {
			return nil, err
		}
		m.Spec.Values = values
	} else if template.Spec.Data != nil {
		m.Spec.Resource = template.Spec.Data.DeepCopy()
	}
	if err := controllerutil.SetControllerReference(kyma, m, r.Scheme()); err != nil {
		return nil, fmt.Errorf("owning Manifest: %w", err)
	}
	return m, nil
}

// localizedImages are the images the template's descriptor lists, as the
// Kyma API's spec.localizedImages, the descriptor found by the content
// pipeline (content.Templates.Descriptor). When it must be read from a
// registry that cannot be read now, the Manifest of the same template
// revision keeps the images it has, as it keeps its pins: a restart during
// a registry outage changes nothing the module renders. Any other Manifest
// is not written: the module's Error says why, and the reconcile is
// retried like any failed registry read.
func (r *Reconciler) localizedImages(ctx context.Context, template *v1beta2.ModuleTemplate, revision string, existing *v1beta2.Manifest) ([]string, error) {
	facts, err := r.descriptors.of(ctx, r.templates(), template)
	if err == nil {
		return facts.images, nil
	}
	if existing != nil && existing.Annotations[templateRevisionAnnotation] == revision {
		return existing.Spec.LocalizedImages, nil
	}
	return nil, fmt.Errorf("reading the images of the module's OCM component descriptor: %w", err)
}

// pinnedResources pins the template's links by digest (content.Templates),
// reusing the existing Manifest's pins when the template has not changed
// since, and a rollout's pins when one moves the fleet to this revision of
// the template (pinned), so that every wave gets the same bytes.
func (r *Reconciler) pinnedResources(ctx context.Context, template *v1beta2.ModuleTemplate, revision string, existing *v1beta2.Manifest, pinned []v1beta2.ContentResource) ([]v1beta2.ContentResource, error) {
	if len(pinned) > 0 {
		return pinned, nil
	}
	templates := r.templates()
	fromDescriptor := templates.FromDescriptor(template)
	if existing != nil && existing.Annotations[templateRevisionAnnotation] == revision {
		if len(existing.Spec.Resources) == len(template.Spec.Resources) && !fromDescriptor ||
			fromDescriptor && len(existing.Spec.Resources) > 0 {
			return existing.Spec.Resources, nil
		}
	}
	return templates.Pin(ctx, template)
}

// templates is the content pipeline's view of ModuleTemplates: their
// links, pinned, and their OCM component descriptor.
func (r *Reconciler) templates() content.Templates {
	return content.Templates{Pinner: r.Pinner, Descriptors: r.Descriptors}
}

func manifestUpToDate(kyma *v1beta2.Kyma, existing, desired *v1beta2.Manifest) bool {
	if !equality.Semantic.DeepEqual(existing.Spec, desired.Spec) {
		return false
	}
	for k, v := range desired.Labels {
		// The bucket alone is no reason to write: the shard's filer writes
		// it on older Manifests (once, and only with shards).
		if existing.Labels[k] != v && k != v1beta2.ShardBucketLabel {
			return false
		}
	}
	for k, v := range desired.Annotations {
		if existing.Annotations[k] != v {
			return false
		}
	}
	return metav1.IsControlledBy(existing, kyma)
}

// debugEnabled applies R12: the Kyma's setting, when given, wins over the
// module's.
func debugEnabled(kyma *v1beta2.Kyma, module v1beta2.Module) bool {
	if kyma.Spec.Debug != nil {
		return *kyma.Spec.Debug
	}
	return module.Debug != nil && *module.Debug
}

func hasHelmChart(template *v1beta2.ModuleTemplate) bool {
	for _, r := range template.Spec.Resources {
		if strings.EqualFold(r.Name, v1beta2.HelmChartResourceName) {
			return true
		}
	}
	return false
}
