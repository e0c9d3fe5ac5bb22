package apply

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Dropping a version of a CRD (KLM #3483). The API server refuses to
// remove a version from a CRD's spec.versions while it is listed in
// status.storedVersions: objects may still be stored in etcd at it, and
// would become unreadable. So, before a module version whose CRD drops
// such a version is applied, every stored object of the CRD is rewritten
// at the new storage version, as the Kubernetes storage-version-migrator
// does: read, and written back unchanged, which the API server encodes at
// the storage version of the moment. Then the old version is taken out of
// storedVersions, and only then is the new CRD applied.
//
// Each step is derived from the live CRD, never from memory: a migration
// cut off half way is found again by the next reconcile (the live CRD
// still lists the old version as stored) and done again; an object
// rewritten already is rewritten as a no-op.

// StorageMigrationFieldManager writes the rewrites, the trimmed
// storedVersions and a CRD put back after a failed migration: kept apart
// from FieldManager, so that none of it is taken for the module's own
// fields. The bridge CRD is the module's and goes under FieldManager.
const StorageMigrationFieldManager = "lifecycle-manager-storage-migration"

// StorageMigration is a CRD of a module's new version that drops versions
// objects may still be stored at.
type StorageMigration struct {
	// CRD is the CRD's name.
	CRD string
	// Kind is the kind it defines; Group its group; Plural its resource.
	Group, Kind, Plural string
	// From are the versions in the live CRD's status.storedVersions that
	// the new CRD lacks, in the live order.
	From []string
	// To is the new CRD's storage version.
	To string

	desired *apiextensionsv1.CustomResourceDefinition
	live    *apiextensionsv1.CustomResourceDefinition
}

// String is the migration as conditions name it.
func (m StorageMigration) String() string {
	return fmt.Sprintf("CRD %s from version %s to %s", m.CRD, joinVersions(m.From), m.To)
}

// DroppedStoredVersions are the versions of live's status.storedVersions
// that desired's spec.versions lacks: those whose objects must be
// migrated before desired can be applied. A CRD that keeps every stored
// version, or drops only versions nothing was ever stored at, has none.
func DroppedStoredVersions(desired, live *apiextensionsv1.CustomResourceDefinition) []string {
	if live == nil {
		return nil
	}
	var dropped []string
	for _, stored := range live.Status.StoredVersions {
		if !slices.ContainsFunc(desired.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == stored }) {
			dropped = append(dropped, stored)
		}
	}
	return dropped
}

// BridgeCRD is the CRD a migration applies first: desired, with the
// versions it drops put back from live as they were (served as before),
// none of them the storage version. Clients of the old version go on
// working while its objects are rewritten at desired's storage version.
func BridgeCRD(desired, live *apiextensionsv1.CustomResourceDefinition, dropped []string) *apiextensionsv1.CustomResourceDefinition {
	bridge := desired.DeepCopy()
	for _, v := range live.Spec.Versions {
		if !slices.Contains(dropped, v.Name) || slices.ContainsFunc(bridge.Spec.Versions, func(d apiextensionsv1.CustomResourceDefinitionVersion) bool { return d.Name == v.Name }) {
			continue
		}
		old := *v.DeepCopy()
		old.Storage = false
		bridge.Spec.Versions = append(bridge.Spec.Versions, old)
	}
	return bridge
}

// TrimmedStoredVersions is live's storedVersions without the dropped
// versions, with to added if the API server has not listed it yet.
func TrimmedStoredVersions(stored, dropped []string, to string) []string {
	trimmed := make([]string, 0, len(stored))
	for _, v := range stored {
		if !slices.Contains(dropped, v) {
			trimmed = append(trimmed, v)
		}
	}
	if !slices.Contains(trimmed, to) {
		trimmed = append(trimmed, to)
	}
	return trimmed
}

// StorageVersionHash is the hash the API server's discovery gives for a
// resource stored at group/version as kind (k8s.io/apiserver's
// discovery.StorageVersionHash).
func StorageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// PlanStorageMigrations finds, among objects (a module's content), the
// CRDs that drop versions still in the live CRD's storedVersions.
func PlanStorageMigrations(ctx context.Context, reader client.Reader, objects []*unstructured.Unstructured) ([]StorageMigration, error) {
	var migrations []StorageMigration
	for _, obj := range objects {
		gvk := obj.GroupVersionKind()
		if gvk.Group != apiextensionsv1.GroupName || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		desired := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, desired); err != nil {
			return nil, fmt.Errorf("reading CRD %s of the content: %w", obj.GetName(), err)
		}
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := reader.Get(ctx, client.ObjectKey{Name: desired.Name}, live); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading CRD %s: %w", desired.Name, err)
		}
		dropped := DroppedStoredVersions(desired, live)
		to := storageVersionOf(desired)
		if len(dropped) == 0 || to == "" {
			continue // nothing stored at a dropped version; or no storage version, which the apply will refuse
		}
		migrations = append(migrations, StorageMigration{
			CRD: desired.Name, Group: desired.Spec.Group, Kind: desired.Spec.Names.Kind, Plural: desired.Spec.Names.Plural,
			From: dropped, To: to, desired: desired, live: live,
		})
	}
	return migrations, nil
}

// Migrator rewrites the stored objects of CRDs, through a client that
// may read and write every object of them, in all namespaces, and the
// CRDs' status.
type Migrator struct {
	Client client.Client
	// StorageHash reads, from the API server's discovery, the storage
	// version hash of group/version's resource plural: the API server
	// switched to the new storage version when it gives the new hash.
	// Nil skips that wait.
	StorageHash func(ctx context.Context, group, version, plural string) (string, error)
	// PageSize is how many objects one list reads; 250 when zero.
	PageSize int64
	// Progress, when set, is told how far the rewrite is: before the
	// first object and after each page.
	Progress func(m StorageMigration, rewritten, total int)
}

// ObjectMigrationError is a stored object that could not be rewritten.
type ObjectMigrationError struct {
	Object string
	Err    error
}

func (e *ObjectMigrationError) Error() string { return "rewriting " + e.Object + ": " + e.Err.Error() }
func (e *ObjectMigrationError) Unwrap() error { return e.Err }

// Migrate does m: the bridge CRD (the new storage version, the old ones
// still served), every stored object rewritten, storedVersions trimmed.
// It returns how many objects it rewrote. When it fails, the CRD is put
// back as it was found, where the API server allows that (it refuses
// only when objects are stored at a version the old CRD lacks, and then
// the bridge, which serves both, stays): the old version stays served and
// stored, and nothing is lost.
func (mg *Migrator) Migrate(ctx context.Context, m StorageMigration) (int, error) {
	bridged := storageVersionOf(m.live) != m.To
	if err := mg.applyBridge(ctx, m); err != nil {
		return 0, err
	}
	n, err := mg.rewriteAndTrim(ctx, m)
	// A migration cut off by the reconcile's deadline keeps the bridge:
	// the next reconcile finds it in place and goes on.
	if err != nil && bridged && ctx.Err() == nil {
		if restoreErr := mg.restore(ctx, m); restoreErr != nil {
			err = errors.Join(err, restoreErr)
		}
	}
	return n, err
}

func (mg *Migrator) rewriteAndTrim(ctx context.Context, m StorageMigration) (int, error) {
	if err := mg.waitForStorageVersion(ctx, m); err != nil {
		return 0, err
	}
	n, err := mg.rewrite(ctx, m)
	if err != nil {
		return n, err
	}
	return n, mg.trim(ctx, m)
}

func (mg *Migrator) applyBridge(ctx context.Context, m StorageMigration) error {
	bridge := BridgeCRD(m.desired, m.live, m.From)
	bridge.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}
	bridge.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	bridge.ManagedFields = nil
	bridge.ResourceVersion = ""
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bridge)
	if err != nil {
		return fmt.Errorf("making the bridge of CRD %s: %w", m.CRD, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	// Under the module's own field manager: the apply of the new CRD that
	// follows the migration then removes the old versions again.
	if err := mg.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("moving the storage version of CRD %s to %s: %w", m.CRD, m.To, err)
	}
	return nil
}

// waitForStorageVersion waits until the API server's discovery gives the
// new storage version's hash: the API server serves the kind from the CRD
// it was just given, so a write from now on is stored at the new version.
// A write a moment earlier could still be stored at the old one.
func (mg *Migrator) waitForStorageVersion(ctx context.Context, m StorageMigration) error {
	if mg.StorageHash == nil {
		return nil
	}
	want := StorageVersionHash(m.Group, m.To, m.Kind)
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		hash, err := mg.StorageHash(ctx, m.Group, m.To, m.Plural)
		if err != nil {
			return false, nil //nolint:nilerr // discovery is updated asynchronously; look again
		}
		last = hash
		return hash == want || hash == "", nil // an API server that gives no hash cannot be waited for
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server to store %s at %s (discovery gives storage hash %q): %w", m.CRD, m.To, last, err)
	}
	return nil
}

// rewrite lists the CRD's objects (metadata only, paged, all namespaces)
// and writes each back unchanged at m.To, with its resourceVersion as a
// precondition. A conflict means someone wrote it meanwhile, which stored
// it at the new version too; an object gone needs nothing.
func (mg *Migrator) rewrite(ctx context.Context, m StorageMigration) (int, error) {
	keys, err := mg.list(ctx, m)
	if err != nil {
		return 0, err
	}
	if mg.Progress != nil {
		mg.Progress(m, 0, len(keys))
	}
	for start := 0; start < len(keys); start += int(mg.pageSize()) {
		page := keys[start:min(start+int(mg.pageSize()), len(keys))]
		if err := mg.rewritePage(ctx, m, page); err != nil {
			return start, err
		}
		if mg.Progress != nil {
			mg.Progress(m, start+len(page), len(keys))
		}
	}
	return len(keys), nil
}

// rewritePage rewrites a page of objects, a few at a time; the error
// names the first object in the page's order that failed.
func (mg *Migrator) rewritePage(ctx context.Context, m StorageMigration, page []client.ObjectKey) error {
	errs := make([]error, len(page))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookupConcurrency)
	for i, key := range page {
		g.Go(func() error {
			if err := mg.rewriteOne(gctx, m, key); err != nil {
				errs[i] = &ObjectMigrationError{Object: describe(m.Kind, key.Namespace, key.Name), Err: err}
				return errs[i]
			}
			return nil
		})
	}
	if err := g.Wait(); err == nil {
		return nil
	}
	for _, err := range errs {
		// The first in order, but not one that only saw the group's
		// context cancelled by another's failure.
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return g.Wait()
}

func (mg *Migrator) list(ctx context.Context, m StorageMigration) ([]client.ObjectKey, error) {
	var keys []client.ObjectKey
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: m.Group, Version: m.To, Kind: m.Kind + "List"})
	opts := []client.ListOption{client.Limit(mg.pageSize())}
	for {
		if err := mg.Client.List(ctx, list, opts...); err != nil {
			if object, ok := unreadable(err, m); ok {
				return nil, &ObjectMigrationError{Object: object, Err: err}
			}
			return nil, fmt.Errorf("listing the objects of CRD %s: %w", m.CRD, err)
		}
		for _, item := range list.Items {
			keys = append(keys, client.ObjectKey{Namespace: item.Namespace, Name: item.Name})
		}
		if list.Continue == "" {
			return keys, nil
		}
		opts = []client.ListOption{client.Limit(mg.pageSize()), client.Continue(list.Continue)}
	}
}

// unreadable names the first object that a list failed to read at the
// new version (a conversion webhook that does not answer fails the whole
// list, naming each object's storage key), with how many more there are.
func unreadable(err error, m StorageMigration) (string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return "", false
	}
	var objects []string
	for _, cause := range status.Status().Details.Causes {
		// /registry/<group>/<plural>/<namespace>/<name>, or without the
		// namespace for a cluster-scoped kind.
		parts := strings.Split(strings.TrimPrefix(cause.Field, "/"), "/")
		if len(parts) < 4 || parts[1] != m.Group || parts[2] != m.Plural {
			continue
		}
		if len(parts) == 5 {
			objects = append(objects, describe(m.Kind, parts[3], parts[4]))
		} else {
			objects = append(objects, describe(m.Kind, "", parts[3]))
		}
	}
	switch len(objects) {
	case 0:
		return "", false
	case 1:
		return objects[0], true
	default:
		return fmt.Sprintf("%s (and %d more)", objects[0], len(objects)-1), true
	}
}

func (mg *Migrator) rewriteOne(ctx context.Context, m StorageMigration, key client.ObjectKey) error {
	gvk := schema.GroupVersionKind{Group: m.Group, Version: m.To, Kind: m.Kind}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := mg.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	// The object as read, resourceVersion included: unchanged, and only
	// if nobody wrote it since. Only its managedFields entries that name a
	// dropped version are moved to the new one: the API server converts
	// an object to the version of each entry on every apply, and would
	// refuse any later server-side apply of it, the runtime owner's too,
	// once the old version is gone.
	obj.SetManagedFields(movedManagedFields(obj.GetManagedFields(), m))
	err := mg.Client.Update(ctx, obj, client.FieldOwner(StorageMigrationFieldManager))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// movedManagedFields are entries with the dropped versions of m replaced
// by m.To. The field sets stay as they were: a conversion that renames
// fields leaves their owner without them, which the next apply of that
// owner sets right.
func movedManagedFields(entries []metav1.ManagedFieldsEntry, m StorageMigration) []metav1.ManagedFieldsEntry {
	moved := make([]metav1.ManagedFieldsEntry, len(entries))
	for i, e := range entries {
		moved[i] = e
		for _, v := range m.From {
			if e.APIVersion == m.Group+"/"+v {
				moved[i].APIVersion = m.Group + "/" + m.To
			}
		}
	}
	return moved
}

// trim takes the dropped versions out of the CRD's storedVersions: every
// object is stored at the new version now.
func (mg *Migrator) trim(ctx context.Context, m StorageMigration) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := mg.Client.Get(ctx, client.ObjectKey{Name: m.CRD}, crd); err != nil {
			return err
		}
		crd.Status.StoredVersions = TrimmedStoredVersions(crd.Status.StoredVersions, m.From, m.To)
		return mg.Client.Status().Update(ctx, crd, client.FieldOwner(StorageMigrationFieldManager))
	})
	if err != nil {
		return fmt.Errorf("removing version %s from the stored versions of CRD %s: %w", joinVersions(m.From), m.CRD, err)
	}
	return nil
}

// restore puts the CRD's spec back as the migration found it.
func (mg *Migrator) restore(ctx context.Context, m StorageMigration) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := mg.Client.Get(ctx, client.ObjectKey{Name: m.CRD}, crd); err != nil {
			return err
		}
		crd.Spec = *m.live.Spec.DeepCopy()
		return mg.Client.Update(ctx, crd, client.FieldOwner(StorageMigrationFieldManager))
	})
	if err != nil {
		return fmt.Errorf("putting CRD %s back as it was (it keeps serving both versions): %w", m.CRD, err)
	}
	return nil
}

func (mg *Migrator) pageSize() int64 {
	if mg.PageSize > 0 {
		return mg.PageSize
	}
	return 250
}

func storageVersionOf(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func joinVersions(versions []string) string { return strings.Join(versions, ", ") }
