// Package backup takes the backups of runtimes on their schedules (SPEC
// G5): for every Kyma a backup schedule selects it keeps a RuntimeBackup of
// the same name, takes a snapshot when the schedule fires (internal/backup),
// thins out old backups, and shows it all in the RuntimeBackup's status.
// After a Kyma is deleted its backups stay for the grace period, then they
// and the RuntimeBackup are deleted.
package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Reasons of a RuntimeBackup's conditions.
const (
	ReasonScheduled          = "Scheduled"
	ReasonUnscheduled        = "Unscheduled"
	ReasonKymaDeleted        = "KymaDeleted"
	ReasonKeyUnavailable     = "KeyUnavailable"
	ReasonRuntimeUnavailable = "RuntimeUnavailable"
	ReasonSnapshotFailed     = "SnapshotFailed"
	ReasonStoreFailed        = "StoreFailed"
)

// maxRecipients bounds the keys a backup is encrypted to (status lists
// their fingerprints): rotation needs two or three.
const maxRecipients = 32

// DefaultGracePeriod is how long backups are kept after their Kyma is
// deleted.
const DefaultGracePeriod = 7 * 24 * time.Hour

// DefaultPoll is the longest a RuntimeBackup waits between looks, so that
// a clock that jumps (a VM resumed) is noticed.
const DefaultPoll = 10 * time.Minute

// maxListed bounds status.backups.
const maxListed = 64

// Reconciler reconciles RuntimeBackups, one per backed-up Kyma.
type Reconciler struct {
	client.Client
	// APIReader confirms, past the cache, that a Kyma the cache does not
	// have is gone, and not only outside this operator's selection
	// (--kyma-selector), whose RuntimeBackups are another operator's.
	APIReader client.Reader
	// Runtimes reaches the runtimes.
	Runtimes *remote.Cache
	// Schedules say which Kymas are backed up, when and where to.
	Schedules *backup.Schedules
	// Store reaches the registries (insecure hosts, credentials).
	Store backup.StoreOptions
	// Namespace holds the Kymas, their RuntimeBackups and the key Secrets.
	Namespace string
	// SyncNamespace is the operator's namespace in runtimes.
	SyncNamespace string
	// GracePeriod keeps backups after their Kyma is deleted.
	GracePeriod time.Duration
	// Clock tells the time; the real one when nil.
	Clock clock.PassiveClock
	// Poll is the longest wait between looks at one RuntimeBackup.
	Poll time.Duration
	// ReconcileTimeout bounds one backup.
	ReconcileTimeout time.Duration
	Events           *reconciler.Events

	// budget says how many backups run at once (SetupWithManager).
	budget *budget
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// Reconcile keeps the RuntimeBackup of the Kyma of the same name: creates
// it for a Kyma a schedule selects, runs the skeleton on it, and deletes it
// with its backups when the grace period after the Kyma's deletion ends.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kyma := &v1beta2.Kyma{}
	if err := r.Get(ctx, req.NamespacedName, kyma); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		kyma = nil
	}
	rb := &v1beta2.RuntimeBackup{}
	if err := r.Get(ctx, req.NamespacedName, rb); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.create(ctx, kyma)
	}
	if kyma == nil && r.APIReader != nil {
		err := r.APIReader.Get(ctx, req.NamespacedName, &v1beta2.Kyma{})
		if err == nil {
			return ctrl.Result{}, nil // another operator's Kyma
		}
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	if expired(rb, r.now()) {
		return ctrl.Result{}, r.expire(ctx, rb)
	}
	return reconciler.Run(ctx, r.Client, rb, reconciler.Phases[*v1beta2.RuntimeBackup]{
		Controller: "backup",
		Gate: func(_ context.Context, rb *v1beta2.RuntimeBackup) (func(), time.Duration) {
			return remote.Gate(r.Runtimes, "backup", rb.Name, rb.Namespace+"/"+rb.Name, nil)
		},
		Deadline: r.ReconcileTimeout,
		Reconcile: func(ctx context.Context, rb *v1beta2.RuntimeBackup) reconciler.Outcome {
			return r.reconcile(ctx, rb, kyma)
		},
		Record: record,
		Status: func(rb *v1beta2.RuntimeBackup) any { return &rb.Status },
		Events: r.Events,
	})
}

// create makes the RuntimeBackup of a Kyma that a schedule selects. Its
// status is filled by the reconcile the creation triggers.
func (r *Reconciler) create(ctx context.Context, kyma *v1beta2.Kyma) error {
	if kyma == nil || !kyma.DeletionTimestamp.IsZero() || r.Schedules.For(kyma.Labels) == nil {
		return nil
	}
	rb := &v1beta2.RuntimeBackup{ObjectMeta: metav1.ObjectMeta{
		Name: kyma.Name, Namespace: kyma.Namespace,
		Labels: map[string]string{v1beta2.KymaNameLabel: kyma.Name, v1beta2.ManagedByLabel: v1beta2.ManagedByValue},
	}}
	if err := r.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating RuntimeBackup %s: %w", kyma.Name, err)
	}
	return nil
}

// expired is a RuntimeBackup whose Kyma is gone and whose grace period is
// over.
func expired(rb *v1beta2.RuntimeBackup, now time.Time) bool {
	return rb.Status.DeleteAfter != nil && !now.Before(rb.Status.DeleteAfter.Time)
}

// expire deletes the backups of a Kyma whose grace period is over, then
// its RuntimeBackup. The repository is the one status names: the schedule
// may have changed since.
func (r *Reconciler) expire(ctx context.Context, rb *v1beta2.RuntimeBackup) error {
	r.unplan(rb.Name)
	if rb.Status.Repository != "" {
		if err := backup.NewStore(rb.Status.Repository, r.Store).DeleteAll(ctx, rb.Name); err != nil {
			return fmt.Errorf("deleting the backups of deleted Kyma %s: %w", rb.Name, err)
		}
	}
	ctrl.LoggerFrom(ctx).Info("Grace period over: backups deleted", "runtimeBackup", client.ObjectKeyFromObject(rb))
	return client.IgnoreNotFound(r.Delete(ctx, rb, client.Preconditions{UID: &rb.UID}))
}

func (r *Reconciler) reconcile(ctx context.Context, rb *v1beta2.RuntimeBackup, kyma *v1beta2.Kyma) reconciler.Outcome {
	now := r.now()
	s := &rb.Status
	if kyma == nil || !kyma.DeletionTimestamp.IsZero() {
		// A Kyma being deleted is losing its modules: the last backup
		// before that is the one to keep.
		if s.DeleteAfter == nil {
			s.KymaDeletedAt = &metav1.Time{Time: now}
			s.DeleteAfter = &metav1.Time{Time: now.Add(r.GracePeriod)}
		}
		r.unplan(rb.Name)
		s.NextScheduleTime = nil
		return reconciler.Ready(ReasonKymaDeleted, "The Kyma is deleted: its backups are kept until deleteAfter, then deleted", r.after(now, s.DeleteAfter.Time))
	}
	s.KymaDeletedAt, s.DeleteAfter = nil, nil
	schedule := r.Schedules.For(kyma.Labels)
	if schedule == nil {
		r.unplan(rb.Name)
		s.NextScheduleTime = nil
		return reconciler.Ready(ReasonUnscheduled, "No backup schedule selects the Kyma: no backups are taken, those taken are kept", 0)
	}
	if s.Schedule != schedule.Name || s.NextScheduleTime == nil {
		from := now
		if s.LastScheduleTime != nil && s.Schedule == schedule.Name {
			from = s.LastScheduleTime.Time
		}
		s.Schedule = schedule.Name
		s.NextScheduleTime = &metav1.Time{Time: schedule.NextFor(kyma.Name, from)}
	}
	s.Repository, s.KeySecret = schedule.Repository, schedule.KeySecret
	// The keys are looked at every time, not only when a backup is due: a
	// missing or private key shows before it costs a backup.
	keys, o := r.keys(ctx, schedule)
	if o.Kind == reconciler.KindRetry {
		return o
	}
	r.plan(rb, schedule)
	if now.Before(s.NextScheduleTime.Time) {
		return r.idle(s, now, keys)
	}

	release, admitted := r.budget.tryAcquire()
	if !admitted {
		// Due, but as many backups as the budget allows are running: the
		// one due longest gets no priority, but the jitter keeps the queue
		// short.
		o := r.idle(s, now, keys)
		o.After = budgetRetryAfter()
		return o
	}
	o = r.take(ctx, rb, kyma, schedule, keys.Recipients, now)
	release()
	s.LastScheduleTime = &metav1.Time{Time: now}
	if o.Kind == reconciler.KindRetry {
		// NextScheduleTime stays due: the backup is retried with backoff.
		s.LastError = o.Message
		return o
	}
	s.LastError = ""
	s.NextScheduleTime = &metav1.Time{Time: schedule.NextFor(kyma.Name, now)}
	r.plan(rb, schedule)
	if o.Kind == reconciler.KindWarning {
		o.After = r.after(now, s.NextScheduleTime.Time)
		return o
	}
	return r.idle(s, now, keys)
}

// plan counts the runtime in the budget and reports when its last good
// backup was taken (its RuntimeBackup's creation while none was).
func (r *Reconciler) plan(rb *v1beta2.RuntimeBackup, schedule *backup.Schedule) {
	r.budget.plan(rb.Name, schedule.Intervals().Shortest)
	last := rb.CreationTimestamp.Time
	if rb.Status.LastSuccessfulTime != nil {
		last = rb.Status.LastSuccessfulTime.Time
	}
	metrics.SetBackupLastSuccess(rb.Name, schedule.Name, last)
}

// unplan takes a runtime that is no longer backed up out of the budget and
// the metrics.
func (r *Reconciler) unplan(kyma string) {
	r.budget.plan(kyma, 0)
	metrics.ForgetBackups(kyma)
}

// idle is the outcome of a RuntimeBackup waiting for its next backup.
func (r *Reconciler) idle(s *v1beta2.RuntimeBackupStatus, now time.Time, keys backup.KeySecret) reconciler.Outcome {
	if s.LastError != "" {
		return reconciler.RetryAfter(ReasonSnapshotFailed, s.LastError, r.after(now, s.NextScheduleTime.Time), nil)
	}
	if keys.HoldsIdentity {
		return reconciler.Warning(identityWarning(s.KeySecret), r.after(now, s.NextScheduleTime.Time))
	}
	return reconciler.Ready(ReasonScheduled, fmt.Sprintf("Backups are taken on schedule %s", s.Schedule), r.after(now, s.NextScheduleTime.Time))
}

// identityWarning tells the SRE to take the private key out of the
// control plane; backups go on meanwhile.
func identityWarning(secret string) string {
	return fmt.Sprintf("The key Secret %s holds a private key (%q): anyone who reads Secrets here can decrypt every backup. "+
		"Put its public key under %q (age-keygen -y), keep the identity outside the control plane and remove %q",
		secret, backup.IdentityKey, backup.RecipientsKey, backup.IdentityKey)
}

// keys are the recipients of the schedule's backups: those it lists and
// those of its key Secret, read at every look so that a rotation applies
// at the next backup.
func (r *Reconciler) keys(ctx context.Context, schedule *backup.Schedule) (backup.KeySecret, reconciler.Outcome) {
	keys := backup.KeySecret{Recipients: schedule.InlineRecipients()}
	if schedule.KeySecret != "" {
		secret := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: schedule.KeySecret}, secret); err != nil {
			return keys, reconciler.Retry(ReasonKeyUnavailable, fmt.Sprintf("Reading the key Secret %s failed: %s", schedule.KeySecret, reconciler.Cause(err)), err)
		}
		fromSecret, err := backup.ReadKeySecret(secret)
		if err != nil {
			return keys, reconciler.Retry(ReasonKeyUnavailable, err.Error(), err)
		}
		keys.Recipients, keys.HoldsIdentity = keys.Recipients.Union(fromSecret.Recipients), fromSecret.HoldsIdentity
	}
	if n := keys.Recipients.Len(); n > maxRecipients {
		msg := fmt.Sprintf("The schedule %s has %d recipients, at most %d are allowed: remove those nobody restores with", schedule.Name, n, maxRecipients)
		return keys, reconciler.Retry(ReasonKeyUnavailable, msg, nil)
	}
	return keys, reconciler.Outcome{}
}

// after is how long to wait until t, at most Poll.
func (r *Reconciler) after(now, t time.Time) time.Duration {
	if d := t.Sub(now); d > 0 && d < r.Poll {
		return d
	}
	return r.Poll
}

// take takes, stores and thins: one backup.
func (r *Reconciler) take(ctx context.Context, rb *v1beta2.RuntimeBackup, kyma *v1beta2.Kyma, schedule *backup.Schedule, recipients backup.Recipients, now time.Time) reconciler.Outcome {
	log := ctrl.LoggerFrom(ctx)
	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if err != nil {
		return reconciler.Retry(ReasonRuntimeUnavailable, fmt.Sprintf("The runtime cannot be reached: %s", reconciler.Cause(err)), err)
	}
	manifests := &v1beta2.ManifestList{}
	if err := r.List(ctx, manifests, client.InNamespace(kyma.Namespace), index.OfKyma(kyma.Name)); err != nil {
		return reconciler.Retry(ReasonSnapshotFailed, fmt.Sprintf("Listing the Kyma's Manifests failed: %s", reconciler.Cause(err)), err)
	}
	snapshot, err := backup.Take(ctx, backup.Source{
		Kyma: kyma, Manifests: manifests.Items, Runtime: cluster.Client, Mapper: cluster.Mapper,
		SyncNamespace: r.SyncNamespace, IncludeSecrets: schedule.IncludeSecrets,
	}, now)
	if err != nil {
		r.Runtimes.EvictOnError(kyma.Name, err)
		return reconciler.Retry(ReasonSnapshotFailed, fmt.Sprintf("Reading the runtime's configuration failed: %s", reconciler.Cause(err)), err)
	}
	store := backup.NewStore(schedule.Repository, r.Store)
	info, err := backup.Save(ctx, store, recipients, snapshot)
	if err != nil {
		return reconciler.Retry(ReasonStoreFailed, fmt.Sprintf("Storing the backup in %s failed: %s", schedule.Repository, reconciler.Cause(err)), err)
	}
	s := &rb.Status
	s.LastSuccessfulTime = &metav1.Time{Time: now}
	s.LastBackup, s.LastSize, s.KeyFingerprints = info.Tag, info.Size, info.KeyFingerprints
	log.Info("Backup stored", "runtimeBackup", client.ObjectKeyFromObject(rb), "backup", info.Tag, "size", info.Size)

	left, thinErr := backup.Thin(ctx, store, kyma.Name, now, schedule.Keep(), schedule.Location())
	if thinErr != nil && left == nil {
		left = append(listed(s.Backups), info)
	}
	s.Count = int32(len(left)) //nolint:gosec // a count of tags, far below 2^31
	s.Backups = records(left, s.Backups, info)
	if thinErr != nil {
		o := reconciler.Warning("The backup is stored; old backups could not be deleted and are tried again at the next backup", 0)
		o.Err = thinErr
		return o
	}
	return reconciler.Ready(ReasonScheduled, "", 0)
}

// listed are the backups status lists, as store entries.
func listed(records []v1beta2.BackupRecord) []backup.Info {
	var out []backup.Info
	for _, rec := range records {
		if t, err := backup.ParseTag(rec.Tag); err == nil {
			out = append(out, backup.Info{Tag: rec.Tag, Time: t, Size: rec.Size, KeyFingerprints: rec.KeyFingerprints})
		}
	}
	return out
}

// records lists the backups held, newest first, with the sizes and key
// fingerprints known from earlier status or this backup.
func records(held []backup.Info, before []v1beta2.BackupRecord, latest backup.Info) []v1beta2.BackupRecord {
	known := map[string]v1beta2.BackupRecord{latest.Tag: {Tag: latest.Tag, Size: latest.Size, KeyFingerprints: latest.KeyFingerprints}}
	for _, rec := range before {
		if _, ok := known[rec.Tag]; !ok {
			known[rec.Tag] = rec
		}
	}
	out := make([]v1beta2.BackupRecord, 0, min(len(held), maxListed))
	for i := len(held) - 1; i >= 0 && len(out) < maxListed; i-- {
		rec := known[held[i].Tag]
		rec.Tag = held[i].Tag
		out = append(out, rec)
	}
	return out
}

func record(rb *v1beta2.RuntimeBackup, o reconciler.Outcome) {
	reconciler.Record(reconciler.Status{Conditions: &rb.Status.Conditions, State: &rb.Status.State, ObservedGeneration: &rb.Status.ObservedGeneration}, rb.Generation, o)
}

// errNoSchedules is returned by SetupWithManager without schedules.
var errNoSchedules = errors.New("backup controller: no schedules")
