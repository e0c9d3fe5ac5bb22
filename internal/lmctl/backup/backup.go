// Package backup is `lmctl backup`: list a runtime's backups, and restore
// one into a recreated runtime of the same Kyma name (SPEC G5). It reads
// what the operator wrote (the RuntimeBackup's repository) and the registry,
// logged in as the operator pushes (credentials.go), and decrypts with the
// identity whoever restores holds; it writes the control plane's Kyma, and
// in the runtime its own Kyma, the custom resources of the modules' CRDs
// and the Namespaces and Secrets they need.
package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/runtimes"
)

// FieldManager owns what a restore writes.
const FieldManager = "lmctl-restore"

// Options locate a Kyma's backups.
type Options struct {
	// KCP is a client of the control plane; Namespace holds the Kyma, its
	// RuntimeBackup and the Secrets named below.
	KCP       client.Client
	Namespace string
	Kyma      string
	// Repository overrides what the RuntimeBackup's status names (needed
	// once it is gone).
	Repository string
	// IdentityFiles are age identity files whose keys decrypt backups;
	// KeySecret instead reads the identity a key Secret of an operator
	// before recipients still holds ("identity"), only when named.
	IdentityFiles []string
	KeySecret     string
	// Credentials log in to the registry; Store reaches it (insecure
	// hosts; its Keychain is set from Credentials).
	Credentials Credentials
	Store       backup.StoreOptions
}

// locate is the store of a Kyma's backups, and what it logs in with, for
// messages.
func (o Options) locate(ctx context.Context) (*backup.Store, string, error) {
	repository := o.Repository
	if repository == "" {
		rb := &v1beta2.RuntimeBackup{}
		if err := o.KCP.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Kyma}, rb); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "", fmt.Errorf("no RuntimeBackup of Kyma %s in %s: name the backups' place with --repository", o.Kyma, o.Namespace)
			}
			return nil, "", fmt.Errorf("reading RuntimeBackup %s: %w", o.Kyma, err)
		}
		repository = rb.Status.Repository
	}
	if repository == "" {
		return nil, "", fmt.Errorf("the RuntimeBackup %s names no repository yet: give --repository", o.Kyma)
	}
	keychain, used, err := o.Credentials.keychain(ctx, o.KCP, o.Namespace)
	if err != nil {
		return nil, "", err
	}
	if host, _, _ := strings.Cut(repository, "/"); o.Credentials.given() == nil && anonymous(keychain, host) {
		used = "anonymously (the docker default credentials have none for " + host + ")"
	}
	opts := o.Store
	opts.Keychain = keychain
	return backup.NewStore(repository, opts), used, nil
}

// anonymous is a keychain that has nothing for the registry.
func anonymous(keychain authn.Keychain, host string) bool {
	reg, err := name.NewRegistry(host)
	if err != nil {
		return true
	}
	auth, err := keychain.Resolve(reg)
	return err != nil || auth == authn.Anonymous
}

// identities are the keys a restore decrypts with: the identity files, or
// the named key Secret's identity.
func (o Options) identities(ctx context.Context) (*backup.Identities, error) {
	switch {
	case len(o.IdentityFiles) > 0 && o.KeySecret != "":
		return nil, errors.New("--identity and --key-secret: give the identity one way only")
	case len(o.IdentityFiles) > 0:
		return backup.ReadIdentityFiles(o.IdentityFiles)
	case o.KeySecret != "":
		secret := &corev1.Secret{}
		if err := o.KCP.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.KeySecret}, secret); err != nil {
			return nil, fmt.Errorf("reading the key Secret %s/%s: %w", o.Namespace, o.KeySecret, err)
		}
		return backup.IdentitiesFromSecret(secret)
	}
	return nil, errors.New("no identity: give the age identity file that decrypts the backups (--identity FILE; lmctl backup list shows the fingerprints of the keys each backup needs)")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Entry is one backup as `lmctl backup list` shows it.
type Entry struct {
	Backup string    `json:"backup"`
	Time   time.Time `json:"time"`
	Size   int64     `json:"size"`
	Digest string    `json:"digest"`
	// KeyFingerprints identify the keys the backup was encrypted to.
	KeyFingerprints []string `json:"keyFingerprints,omitempty"`
}

// List is the Kyma's backups, newest first, as the registry has them.
func List(ctx context.Context, o Options) ([]Entry, error) {
	store, used, err := o.locate(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := store.List(ctx, o.Kyma)
	if err != nil {
		return nil, explainRefusal(err, strings.TrimSuffix(store.Ref(o.Kyma, ""), ":"), used)
	}
	out := make([]Entry, 0, len(infos))
	for i := len(infos) - 1; i >= 0; i-- {
		info, err := store.Describe(ctx, o.Kyma, infos[i])
		if err != nil {
			return nil, explainRefusal(err, strings.TrimSuffix(store.Ref(o.Kyma, ""), ":"), used)
		}
		out = append(out, Entry{Backup: info.Tag, Time: info.Time, Size: info.Size, Digest: info.Digest, KeyFingerprints: info.KeyFingerprints})
	}
	return out, nil
}

// RestoreOptions say which backup to restore and how long to wait for the
// operator to prepare the runtime.
type RestoreOptions struct {
	Options
	// Backup is the tag to restore; empty is the newest backup taken
	// before the Kyma was created (a backup of the new, empty runtime is
	// never picked by itself).
	Backup string
	// Timeout bounds the waits for the runtime's Kyma and the modules'
	// CRDs.
	Timeout time.Duration
	// Progress receives a line per step; may be nil.
	Progress io.Writer
}

// Result is what a restore did: the backup, the modules it restored, and
// what it did with each object, in the order it did it.
type Result struct {
	Kyma   string `json:"kyma"`
	Backup string `json:"backup"`
	// Format is the backup's snapshot format (backup.FormatVersion, or an
	// older one).
	Format         int            `json:"format"`
	Modules        []string       `json:"modules"`
	RuntimeModules []string       `json:"runtimeModules,omitempty"`
	Objects        []ObjectResult `json:"objects"`
}

// Restore restores a backup into the runtime the Kyma now stands for: the
// Kyma's modules, channel and opt-in labels in the control plane, then in
// the runtime, in dependency order, the runtime's own Kyma, the Namespaces
// and Secrets the backup's custom resources need, and the custom resources
// once their CRDs (which the modules bring) exist (runtimeRestore). It
// creates what is missing and leaves what exists. Nothing is written before
// the backup is read and decrypted, so a wrong key changes nothing. When
// some objects failed the error wraps ErrIncomplete and the Result says
// which.
func Restore(ctx context.Context, o RestoreOptions) (Result, error) {
	ids, err := o.identities(ctx)
	if err != nil {
		return Result{}, err
	}
	store, used, err := o.locate(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := restore(ctx, o, store, ids)
	return res, explainRefusal(err, strings.TrimSuffix(store.Ref(o.Kyma, ""), ":"), used)
}

func restore(ctx context.Context, o RestoreOptions, store *backup.Store, key *backup.Identities) (Result, error) {
	var err error
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	kyma := &v1beta2.Kyma{}
	if err := o.KCP.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Kyma}, kyma); err != nil {
		if apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("no Kyma %s: register the new runtime (its kubeconfig Secret and Kyma) first", o.Kyma)
		}
		return Result{}, err
	}
	tag := o.Backup
	if tag == "" {
		if tag, err = newestBefore(ctx, store, o.Kyma, kyma.CreationTimestamp.Time); err != nil {
			return Result{}, err
		}
	}
	snapshot, err := backup.Open(ctx, store, key, o.Kyma, tag)
	if err != nil {
		return Result{}, err
	}
	fmt.Fprintf(progress, "Restoring backup %s (format %d)\n", store.Ref(o.Kyma, tag), snapshot.Format)
	res := Result{Kyma: o.Kyma, Backup: tag, Format: snapshot.Format}
	deadline := time.Now().Add(o.Timeout)

	if err := restoreKyma(ctx, o.KCP, kyma, snapshot); err != nil {
		return res, err
	}
	for _, m := range snapshot.Spec.Modules {
		res.Modules = append(res.Modules, m.Name)
	}
	res.Objects = append(res.Objects, ObjectResult{Kind: "Kyma", Namespace: o.Namespace, Name: o.Kyma, Action: Updated, Reason: "modules " + strings.Join(res.Modules, ", ")})
	fmt.Fprintf(progress, "Kyma %s: modules %v\n", o.Kyma, res.Modules)
	if snapshot.RuntimeKyma != nil {
		for _, m := range snapshot.RuntimeKyma.Spec.Modules {
			res.RuntimeModules = append(res.RuntimeModules, m.Name)
		}
	}

	cfg, err := runtimes.Config(ctx, o.KCP, o.Namespace, o.Kyma)
	if err != nil {
		return res, err
	}
	rt, err := client.New(cfg, client.Options{Scheme: o.KCP.Scheme()})
	if err != nil {
		return res, err
	}
	syncNamespace := cmpOr(kyma.Spec.SyncNamespace, v1beta2.DefaultRuntimeNamespace)
	r := &runtimeRestore{rt: rt, cfg: cfg, progress: progress, deadline: deadline, res: &res}
	r.run(ctx, snapshot, client.ObjectKey{Namespace: syncNamespace, Name: v1beta2.DefaultRuntimeKymaName})
	if n := res.Failed(); n > 0 {
		return res, fmt.Errorf("%d of the %d objects of backup %s were not restored: %w", n, len(res.Objects), tag, ErrIncomplete)
	}
	return res, nil
}

// newestBefore is the newest backup taken before t.
func newestBefore(ctx context.Context, store *backup.Store, kyma string, t time.Time) (string, error) {
	infos, err := store.List(ctx, kyma)
	if err != nil {
		return "", err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].Time.Before(t) {
			return infos[i].Tag, nil
		}
	}
	if len(infos) == 0 {
		return "", fmt.Errorf("no backups of Kyma %s", kyma)
	}
	return "", fmt.Errorf("no backup of Kyma %s from before it was created (%s): name one with --backup", kyma, t.UTC().Format(time.RFC3339))
}

// restoreKyma puts the backup's module choices into the control plane's
// Kyma: its modules (a module the Kyma lists already keeps its entry), the
// channel, the flags, and the beta and internal opt-ins. The runtime id,
// sync namespace and other labels are the new registration's. A Kyma
// registered moments ago is still being written by the operator (its
// finalizers, labels): a conflict reads it again and retries.
func restoreKyma(ctx context.Context, c client.Client, kyma *v1beta2.Kyma, s *backup.Snapshot) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(kyma), kyma); err != nil {
			return err
		}
		return c.Patch(ctx, kyma, backedUpChoices(kyma, s))
	})
	if err != nil {
		return fmt.Errorf("restoring Kyma %s: %w", kyma.Name, err)
	}
	return nil
}

// backedUpChoices puts the backup's choices into kyma and returns the
// patch, locked to the version read.
func backedUpChoices(kyma *v1beta2.Kyma, s *backup.Snapshot) client.Patch {
	patch := client.MergeFromWithOptions(kyma.DeepCopy(), client.MergeFromWithOptimisticLock{})
	kyma.Spec.Modules = mergeModules(kyma.Spec.Modules, s.Spec.Modules)
	kyma.Spec.Channel = cmpOr(s.Spec.Channel, kyma.Spec.Channel)
	kyma.Spec.SkipMaintenanceWindows = s.Spec.SkipMaintenanceWindows
	kyma.Spec.Debug = s.Spec.Debug
	for _, l := range []string{v1beta2.BetaLabel, v1beta2.InternalLabel} {
		if v, ok := s.Labels[l]; ok {
			if kyma.Labels == nil {
				kyma.Labels = map[string]string{}
			}
			kyma.Labels[l] = v
		}
	}
	return patch
}

// mergeModules adds the backup's modules to those listed, in the backup's
// order; a module listed already keeps its entry.
func mergeModules(listed, backedUp []v1beta2.Module) []v1beta2.Module {
	out := slices.Clone(listed)
	for _, m := range backedUp {
		if !slices.ContainsFunc(out, func(l v1beta2.Module) bool { return l.Name == m.Name }) {
			out = append(out, m)
		}
	}
	return out
}

// waitForKind waits, until the restore's deadline, for the runtime to
// serve the kind, asking discovery afresh each time: the module's CRD
// comes with its installation.
func (r *runtimeRestore) waitForKind(ctx context.Context, gvk schema.GroupVersionKind) error {
	ctx, cancel := r.waitCtx(ctx)
	defer cancel()
	cfg := r.cfg
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return false, err
		}
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
		if err != nil {
			return false, nil //nolint:nilerr // discovery fails while the runtime starts: try again
		}
		_, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		return err == nil, nil
	})
	if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
		return fmt.Errorf("the runtime does not serve %s (CRD not installed within --timeout): is its module installed there?", gvk)
	}
	return err
}
