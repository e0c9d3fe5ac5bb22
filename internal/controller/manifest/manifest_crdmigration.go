package manifest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

const (
	// ReasonMigratingStoredVersions means a CRD of the new version drops a
	// version objects are stored at; they are being rewritten at the new
	// storage version before the new version is applied.
	ReasonMigratingStoredVersions = "MigratingStoredVersions"
	// ReasonStorageMigrationFailed means rewriting the stored objects of such a
	// CRD failed; the old CRD and the installed version are kept.
	ReasonStorageMigrationFailed = "StorageMigrationFailed"
	// ReasonStoredVersionsMigrated (an event) means every stored object of a CRD
	// was rewritten and the old version left its storedVersions.
	ReasonStoredVersionsMigrated = "StoredVersionsMigrated"
)

// migrateStoredVersions migrates, before anything of a new module
// version is applied, the stored objects of each of its CRDs that drops a
// version still in the live CRD's storedVersions (apply.StorageMigration);
// ok is false when the reconcile must end with o: a migration failed, and
// nothing of the new version is applied.
//
// It writes through the operator's own connection to the runtime
// (cluster.Client), not the module's identity: it rewrites every object
// of the CRD in every namespace, the runtime owner's too, and the CRD's
// status, none of which the module's identity may write (and must not be
// granted: its rights are what it owns). The writes change nothing in the
// objects; only their encoding in etcd.
func (r *Reconciler) migrateStoredVersions(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, plan *apply.Plan) (o reconciler.Outcome, ok bool) {
	migrations, err := apply.PlanStorageMigrations(ctx, cluster.Client, plan.Writable())
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return reconciler.Retry(ReasonApplyFailed, failedMessage("Reading the module's CRDs in the runtime", err), err), false
	}
	if len(migrations) == 0 {
		return reconciler.Outcome{}, true
	}
	log := ctrl.LoggerFrom(ctx)
	migrator := &apply.Migrator{
		Client:      cluster.Client,
		StorageHash: storageHash(cluster.Config),
		Progress: func(m apply.StorageMigration, rewritten, total int) {
			reconciler.ReportProgress(ctx, migratingStoredVersions(m, rewritten, total))
		},
	}
	for _, m := range migrations {
		log.Info("Migrating stored objects before the new CRD drops their version", "crd", m.CRD, "from", m.From, "to", m.To)
		rewritten, err := migrator.Migrate(ctx, m)
		if err != nil {
			return storageMigrationFailed(m, err), false
		}
		r.events.Normal(manifest, ReasonStoredVersionsMigrated, fmt.Sprintf(
			"Migrated %d stored objects of %s; removed %s from its stored versions", rewritten, m, joinVersions(m.From)))
	}
	return reconciler.Outcome{}, true
}

func migratingStoredVersions(m apply.StorageMigration, rewritten, total int) reconciler.Outcome {
	return reconciler.Progressing(ReasonMigratingStoredVersions, fmt.Sprintf(
		"Migrating %d stored objects of %s: %d of %d rewritten", total, m, rewritten, total), 0)
}

// storageMigrationFailed names the CRD, the object that could not be
// rewritten and the error's class. The API server's own text goes to the
// events.
func storageMigrationFailed(m apply.StorageMigration, err error) reconciler.Outcome {
	at := ""
	var objErr *apply.ObjectMigrationError
	if errors.As(err, &objErr) {
		at = " at " + objErr.Object
	}
	return reconciler.Retry(ReasonStorageMigrationFailed, fmt.Sprintf(
		"Migrating the stored objects of %s failed%s: %s. The CRD keeps version %s, the module stays at its installed version and nothing of the new one is applied; retrying with backoff. The Manifest's events give the error (a conversion webhook that does not answer, or a write that an admission webhook refuses)",
		m, at, reconciler.Cause(err), joinVersions(m.From)), err)
}

// storageHash reads the storage version hash of a resource from the
// runtime's discovery.
func storageHash(config *rest.Config) func(ctx context.Context, group, version, plural string) (string, error) {
	return func(_ context.Context, group, version, plural string) (string, error) {
		dc, err := discovery.NewDiscoveryClientForConfig(config)
		if err != nil {
			return "", err
		}
		list, err := dc.ServerResourcesForGroupVersion(group + "/" + version)
		if err != nil {
			return "", err
		}
		for _, res := range list.APIResources {
			if res.Name == plural {
				return res.StorageVersionHash, nil
			}
		}
		return "", fmt.Errorf("resource %s not in the discovery of %s/%s", plural, group, version)
	}
}

func joinVersions(versions []string) string { return strings.Join(versions, ", ") }
