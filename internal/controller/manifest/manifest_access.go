package manifest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/access"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// Least privilege for modules (SPEC R10, internal/access). A module whose
// template declares RBAC has an identity of its own in each runtime, and
// every write of its content — apply, dry-run, prune, removal, its default
// custom resource — is made as that identity: the runtime's API server
// refuses what the module's grant does not cover. A module that declares
// none is written as the runtime's admin or refused, as
// AccessOptions.Undeclared says.

// What AccessOptions.Undeclared may be.
const (
	// UndeclaredAdmin writes a module that declares no RBAC with the
	// runtime's kubeconfig, as before modules had identities: what every
	// module published for the Kyma API needs, as that API has no RBAC
	// field.
	UndeclaredAdmin = "admin"
	// UndeclaredRefuse refuses a module that declares no RBAC: its
	// Manifest shows Error and nothing is written.
	UndeclaredRefuse = "refuse"
)

// AccessOptions configure the modules' identities.
type AccessOptions struct {
	// Undeclared is UndeclaredAdmin or UndeclaredRefuse; empty means admin.
	Undeclared string
	// TokenTTL is the lifetime of the token in the kubeconfig Secret of a
	// module whose operator runs in the control plane; at least
	// access.MinTokenTTL.
	TokenTTL time.Duration
	// TokenRenewBefore is how long before it expires a token is renewed;
	// zero means half of TokenTTL.
	TokenRenewBefore time.Duration
}

// Validate says what is wrong with the options.
func (o AccessOptions) Validate() error {
	switch o.Undeclared {
	case "", UndeclaredAdmin, UndeclaredRefuse:
	default:
		return fmt.Errorf("--undeclared-module-access is %q: use %s or %s", o.Undeclared, UndeclaredAdmin, UndeclaredRefuse)
	}
	if o.TokenTTL < access.MinTokenTTL {
		return fmt.Errorf("--module-token-ttl is %s: the API server issues tokens for %s at least", o.TokenTTL, access.MinTokenTTL)
	}
	if o.TokenRenewBefore < 0 || o.TokenRenewBefore >= o.TokenTTL {
		return fmt.Errorf("--module-token-renew-before is %s: it must be shorter than --module-token-ttl (%s)", o.TokenRenewBefore, o.TokenTTL)
	}
	return nil
}

// renewBefore is how long before its expiry a token is renewed.
func (o AccessOptions) renewBefore() time.Duration {
	if o.TokenRenewBefore > 0 {
		return o.TokenRenewBefore
	}
	return o.TokenTTL / 2
}

// identity is the Manifest's module identity; false for a module that
// declares no RBAC.
func (r *Reconciler) identity(manifest *v1beta2.Manifest) (access.Identity, bool) {
	if manifest.Spec.RBAC == nil {
		return access.Identity{}, false
	}
	return access.Identity{Kyma: kymaName(manifest), Module: manifest.Spec.ModuleName, Namespace: r.syncNamespace(manifest)}, true
}

// writer is the client that writes the module's content: as its identity
// (reads stay the connection's), or as admin for a module that declares no
// RBAC. It assumes the identity exists (prepareWriter makes it). Removing
// what a module wrote as admin is done as admin even when the operator now
// refuses such modules: it only ever takes away what the operator wrote.
func (r *Reconciler) writer(cluster *remote.Cluster, manifest *v1beta2.Manifest) (client.Client, error) {
	id, ok := r.identity(manifest)
	if !ok {
		return cluster.Client, nil
	}
	as, err := cluster.As(id.Username())
	if err != nil {
		return nil, err
	}
	return access.Client(cluster.Client, as), nil
}

var errUndeclaredRefused = errors.New("the module declares no RBAC and this operator runs with --undeclared-module-access=refuse")

// prepareWriter makes sure the module's identity holds what writing objects
// (the rendered content; the default custom resource is added here) takes,
// records it in status, and returns the writer and, when namespaces the
// content creates are still missing, a step that grants the writes in them
// once the content's Namespaces are applied.
func (r *Reconciler) prepareWriter(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, plan *apply.Plan) (client.Client, func(context.Context) error, reconciler.Outcome, bool) {
	id, declared := r.identity(manifest)
	if !declared {
		if r.Access.Undeclared == UndeclaredRefuse {
			return nil, nil, undeclaredRefused(manifest, r.Intervals), false
		}
		if manifest.Status.Access != nil && manifest.Status.Access.Identity != v1beta2.IdentityAdmin {
			// The module declared RBAC before and no longer does: its
			// identity has no use left.
			if err := r.removeIdentity(ctx, cluster, manifest); err != nil {
				return nil, nil, reconciler.Retry(ReasonApplyFailed, failedMessage("Removing the module's identity", err), err), false
			}
		}
		manifest.Status.Access = &v1beta2.ModuleAccess{Identity: v1beta2.IdentityAdmin}
		return cluster.Client, nil, reconciler.Outcome{}, true
	}
	// On a first install the default CR's kind is not served yet: its CRD
	// is in the content, which says its scope.
	cr, err := defaultCustomResource(manifest, r.syncNamespace(manifest), scopeWithContent(plan.Objects, cluster.Mapper))
	if err != nil {
		cr = nil // moduleState reports it
	}
	own := plan.OwnNamespaces([]string{access.ServiceAccountNamespace})
	if cr != nil && cr.GetNamespace() != "" && !slices.Contains(own, cr.GetNamespace()) {
		cr = nil // not the module's to create there: nothing granted
	}
	grant, err := access.Derive(*manifest.Spec.RBAC, own, plan.Writable(), cr, grantedResources(manifest), cluster.Mapper)
	if err != nil {
		return nil, nil, reconciler.Retry(ReasonApplyFailed, failedMessage("Finding what the module's identity must be granted", err), err), false
	}
	pending, err := r.ensureIdentity(ctx, cluster, id, grant)
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return nil, nil, reconciler.Retry(ReasonApplyFailed, failedMessage("Writing the module's identity to the runtime", err), err), false
	}
	w, err := r.writer(cluster, manifest)
	if err != nil {
		return nil, nil, reconciler.Retry(ReasonApplyFailed, failedMessage("Creating the module's client", err), err), false
	}
	previous := manifest.Status.Access
	manifest.Status.Access = &v1beta2.ModuleAccess{Identity: id.String(), Writes: grant.Writes()}
	if previous != nil && previous.Identity == id.String() {
		manifest.Status.Access.Kubeconfig, manifest.Status.Access.TokenExpires = previous.Kubeconfig, previous.TokenExpires
	}
	var grantPending func(context.Context) error
	if len(pending) > 0 {
		grantPending = func(ctx context.Context) error {
			still, err := r.ensureIdentity(ctx, cluster, id, grant)
			if err == nil && len(still) > 0 {
				err = fmt.Errorf("namespaces %v are still missing after the content's Namespaces were applied", still)
			}
			return err
		}
	}
	return w, grantPending, reconciler.Outcome{}, true
}

// removalWriter is the client that removes the module's objects after the
// runtime refused them to the module's identity: as the identity, once its
// grant for what is left (the inventory and the default custom resource) is
// written again. Someone may have deleted the identity's bindings in the
// runtime; removing as an identity that holds nothing would be refused for
// ever.
func (r *Reconciler) removalWriter(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) (client.Client, error) {
	id, declared := r.identity(manifest)
	if !declared {
		return cluster.Client, nil
	}
	plan, err := apply.PlanModule(ctx, cluster.Client, nil, r.owner(manifest), manifest.Status.Synced)
	if err != nil {
		return nil, err
	}
	own := plan.OwnNamespaces([]string{access.ServiceAccountNamespace})
	cr, err := defaultCustomResource(manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil || (cr != nil && cr.GetNamespace() != "" && !slices.Contains(own, cr.GetNamespace())) {
		cr = nil // its kind is gone, or it is not the module's to delete there
	}
	grant, err := access.Derive(*manifest.Spec.RBAC, own, nil, cr, grantedResources(manifest), cluster.Mapper)
	if err != nil {
		return nil, fmt.Errorf("finding what the module's identity needs to remove its objects: %w", err)
	}
	// What the runtime holds is not what was remembered: write it whatever
	// the memory says. Namespaces of the inventory that are gone already
	// need no grant.
	forgetIdentity(cluster, id)
	if _, err := r.ensureIdentity(ctx, cluster, id, grant); err != nil {
		return nil, err
	}
	return r.writer(cluster, manifest)
}

// removalRefused is the outcome of a removal that the runtime refused to
// the module's identity, although its grant was written again before:
// something in the runtime (an admission webhook or policy, RBAC changed
// under the operator) keeps it from deleting the module's objects. It is
// Stalled, for a person to look at, rather than retried as if it were
// passing; the grant is forgotten, so that the next look writes it again.
func (r *Reconciler) removalRefused(cluster *remote.Cluster, manifest *v1beta2.Manifest, err error) (reconciler.Outcome, bool) {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) || manifest.Spec.RBAC == nil {
		return reconciler.Outcome{}, false
	}
	r.refused(cluster, manifest)
	object := "an object of the module"
	if d := status.Status().Details; d != nil && d.Kind != "" && d.Name != "" {
		object = fmt.Sprintf("%s %q", d.Kind, d.Name)
	}
	o := reconciler.Stalled(ReasonDeleteFailed, fmt.Sprintf(
		"The runtime refused to let the module's identity remove %s, although the identity's grant was written before the removal. "+
			"Something in the runtime refuses the deletion (an admission webhook or policy, or RBAC changed under the operator): "+
			"find it in the Manifest's events. The grant is written again and the removal tried again every %s",
		object, r.Intervals.After(v1beta2.StateError)), err)
	o.After = r.Intervals.After(v1beta2.StateError)
	return o, true
}

// scopeWithContent tells whether a kind is namespaced from the CRDs among
// objects when one of them defines it, else from the runtime.
func scopeWithContent(objects []*unstructured.Unstructured, mapper meta.RESTMapper) func(schema.GroupVersionKind) (bool, error) {
	runtimeScope := namespacedFunc(mapper)
	return func(gvk schema.GroupVersionKind) (bool, error) {
		for _, obj := range objects {
			if obj.GroupVersionKind().GroupKind() != crdGroupKind {
				continue
			}
			group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
			if group == gvk.Group && kind == gvk.Kind {
				scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope")
				return scope == "Namespaced", nil
			}
		}
		return runtimeScope(gvk)
	}
}

var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// ensuredGrants is, per identity of a runtime, the hash of the grant last
// written (see remote.Recall): a module whose grant did not change costs
// no writes.
type ensuredGrants map[access.Identity]string

func (r *Reconciler) ensureIdentity(ctx context.Context, cluster *remote.Cluster, id access.Identity, grant access.Grant) ([]string, error) {
	hash := grant.Hash()
	ensured, _ := remote.Recall[ensuredGrants](cluster)
	if ensured[id] == hash {
		return nil, nil
	}
	pending, err := access.Ensure(ctx, cluster.Client, id, grant)
	if err != nil || len(pending) > 0 {
		return pending, err
	}
	next := maps.Clone(ensured)
	if next == nil {
		next = ensuredGrants{}
	}
	next[id] = hash
	remote.Remember(cluster, next)
	return nil, nil
}

// forgetIdentity makes the next write of the identity's grant happen even
// when its hash is unchanged: the runtime refused a write, so what it holds
// may not be what was remembered (someone deleted a Role).
func forgetIdentity(cluster *remote.Cluster, id access.Identity) {
	ensured, ok := remote.Recall[ensuredGrants](cluster)
	if !ok || ensured[id] == "" {
		return
	}
	next := maps.Clone(ensured)
	delete(next, id)
	remote.Remember(cluster, next)
}

// refused is what a refused write of the module's identity makes the
// operator forget: the grant it believed written, and the module's
// fingerprint, so that the next reconcile writes the grant and the content
// again rather than finding them unchanged.
func (r *Reconciler) refused(cluster *remote.Cluster, manifest *v1beta2.Manifest) {
	r.verified.Forget(manifest.UID)
	if id, ok := r.identity(manifest); ok {
		forgetIdentity(cluster, id)
	}
}

// removeIdentity removes the module's identity from the runtime and its
// kubeconfig Secret from the control plane; its tokens stop working.
func (r *Reconciler) removeIdentity(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) error {
	if err := r.deleteKubeconfigSecret(ctx, manifest); err != nil {
		return err
	}
	id := access.Identity{Kyma: kymaName(manifest), Module: manifest.Spec.ModuleName, Namespace: r.syncNamespace(manifest)}
	if cluster != nil {
		forgetIdentity(cluster, id)
		if err := access.Remove(ctx, cluster.Client, id); err != nil {
			return err
		}
	}
	manifest.Status.Access = nil
	return nil
}

// accessRefused is the outcome of a write that the runtime's API server
// refused to the module's identity: the content asks for more than the
// module declares. It names the object, from the refusal's details.
func accessRefused(manifest *v1beta2.Manifest, err error, intervals requeue.Intervals) (reconciler.Outcome, bool) {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) || manifest.Spec.RBAC == nil {
		return reconciler.Outcome{}, false
	}
	object := "an object of the module's content"
	if d := status.Status().Details; d != nil && d.Kind != "" {
		kind := d.Kind
		if d.Group != "" {
			kind += "." + d.Group
		}
		object = fmt.Sprintf("%s %q", kind, d.Name)
		if d.Name == "" {
			object = "a new object of " + kind
		}
	}
	o := reconciler.Stalled(ReasonAccessRefused, fmt.Sprintf(
		"The runtime refused to let the module's identity write %s: the module's content asks for more than its ModuleTemplate declares in spec.rbac "+
			"(RBAC that grants rights the module does not hold, or an object in a namespace the content does not create). "+
			"Declare what the module needs in spec.rbac, or remove the object from the content. Nothing else was changed; the Manifest's events give the refusal",
		object), err)
	o.After = intervals.After(v1beta2.StateError)
	return o, true
}

func undeclaredRefused(manifest *v1beta2.Manifest, intervals requeue.Intervals) reconciler.Outcome {
	o := reconciler.Stalled(ReasonAccessRefused, fmt.Sprintf(
		"Module %s declares no RBAC (spec.rbac of its ModuleTemplate) and this operator runs with --undeclared-module-access=refuse: "+
			"it writes no module with the runtime's admin rights. Publish the module with spec.rbac; nothing was written",
		manifest.Spec.ModuleName), errUndeclaredRefused)
	o.After = intervals.After(v1beta2.StateError)
	return o
}

// kubeconfigSecretName is the control-plane Secret that holds the module's
// kubeconfig for its runtime.
func kubeconfigSecretName(manifest *v1beta2.Manifest) string {
	return manifest.Name + "-module-kubeconfig"
}

// ModuleKubeconfigLabel marks the kubeconfig Secrets of modules whose
// operator runs in the control plane; its value is the module's name. The
// Secret's KymaAnnotation names the Kyma whose runtime it reaches.
const ModuleKubeconfigLabel = "operator.kyma-project.io/module-kubeconfig"

// KymaAnnotation names, on a module's kubeconfig Secret, the Kyma whose
// runtime the kubeconfig reaches. It is not the Kyma label: that one marks
// the runtime's own (admin) kubeconfig Secret.
const KymaAnnotation = "operator.kyma-project.io/kyma"

// tokenDue tells whether the Manifest's module needs a kubeconfig token,
// a first or a renewed one.
func (r *Reconciler) tokenDue(manifest *v1beta2.Manifest, now time.Time) bool {
	if !manifest.Spec.OperatorKubeconfig || manifest.Spec.RBAC == nil {
		return false
	}
	a := manifest.Status.Access
	return a == nil || a.TokenExpires == nil || !now.Before(a.TokenExpires.Add(-r.Access.renewBefore()))
}

// untilTokenDue is how long until the Manifest's token must be renewed;
// false when it has none to renew.
func (r *Reconciler) untilTokenDue(manifest *v1beta2.Manifest, now time.Time) (time.Duration, bool) {
	a := manifest.Status.Access
	if !manifest.Spec.OperatorKubeconfig || a == nil || a.TokenExpires == nil {
		return 0, false
	}
	return max(a.TokenExpires.Add(-r.Access.renewBefore()).Sub(now), 0), true
}

// keepToken writes the control-plane kubeconfig Secret of a module whose
// operator runs in the control plane (ensureKubeconfig) after an install
// whose outcome is o, whatever o is. A token is issued only for an identity
// that exists: one this Manifest's status records. A failure to write it
// fails a successful install; after a failed install, it is reported as an
// event and the install's own failure stays what the status shows.
func (r *Reconciler) keepToken(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, o reconciler.Outcome) reconciler.Outcome {
	id, declared := r.identity(manifest)
	if o.Err != nil && declared && (manifest.Status.Access == nil || manifest.Status.Access.Identity != id.String()) {
		return o // no identity yet to issue a token for
	}
	err := r.ensureKubeconfig(ctx, cluster, manifest)
	switch {
	case err == nil:
		if until, ok := r.untilTokenDue(manifest, time.Now()); ok && o.Err != nil && o.After > until {
			o.After = max(until, time.Second) // a failing Manifest comes back in time to renew
		}
		return o
	case o.Err != nil:
		r.events.Warn(manifest, ReasonApplyFailed, fmt.Errorf("renewing the module's kubeconfig token: %w", err))
		return o
	default:
		return reconciler.Retry(ReasonApplyFailed, failedMessage("Writing the module's kubeconfig Secret", err), err)
	}
}

// ensureKubeconfig writes the control-plane Secret of a module whose
// operator runs in the control plane, with a new token when the last one is
// due for renewal. The old token stays valid until it expires, so the
// module's operator has no outage while it picks up the new one.
func (r *Reconciler) ensureKubeconfig(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) error {
	id, ok := r.identity(manifest)
	if !ok || !manifest.Spec.OperatorKubeconfig {
		if manifest.Status.Access != nil && manifest.Status.Access.Kubeconfig != "" {
			if err := r.deleteKubeconfigSecret(ctx, manifest); err != nil {
				return err
			}
			manifest.Status.Access.Kubeconfig, manifest.Status.Access.TokenExpires = "", nil
		}
		return nil
	}
	if !r.tokenDue(manifest, time.Now()) {
		return nil
	}
	token, err := access.IssueToken(ctx, cluster.Client, cluster.Config, id, r.Access.TokenTTL)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      kubeconfigSecretName(manifest),
			Namespace: manifest.Namespace,
			Labels: map[string]string{
				v1beta2.ManagedByLabel: v1beta2.ManagedByValue,
				ModuleKubeconfigLabel:  manifest.Spec.ModuleName,
			},
			Annotations: map[string]string{KymaAnnotation: kymaName(manifest)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1beta2.GroupVersion.String(), Kind: "Manifest", Name: manifest.Name, UID: manifest.UID,
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{remote.KubeconfigKey: token.Kubeconfig},
	}
	if err := applySecret(ctx, r.Client, secret); err != nil {
		return err
	}
	if manifest.Status.Access == nil {
		manifest.Status.Access = &v1beta2.ModuleAccess{Identity: id.String()}
	}
	manifest.Status.Access.Kubeconfig = secret.Name
	manifest.Status.Access.TokenExpires = &metav1.Time{Time: token.Expires}
	return nil
}

func (r *Reconciler) deleteKubeconfigSecret(ctx context.Context, manifest *v1beta2.Manifest) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kubeconfigSecretName(manifest), Namespace: manifest.Namespace}}
	if err := r.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the module's kubeconfig Secret %s: %w", secret.Name, err)
	}
	return nil
}

// applySecret server-side applies a Secret of the operator's.
func applySecret(ctx context.Context, c client.Client, secret *corev1.Secret) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	if err != nil {
		return fmt.Errorf("encoding Secret %s: %w", secret.Name, err)
	}
	delete(u["metadata"].(map[string]any), "creationTimestamp")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner(accessFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the module's kubeconfig Secret %s: %w", secret.Name, err)
	}
	return nil
}

// accessFieldManager writes the modules' kubeconfig Secrets.
const accessFieldManager = "lifecycle-manager-access"
