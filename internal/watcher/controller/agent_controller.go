// Package controller puts the runtime-watcher agent into every runtime (SPEC
// R9): for each Kyma it keeps the runtime's certificates (issued by the
// watcher CA, rotated before expiry, in the control plane and in the
// runtime), the agent's RBAC, Deployment and Service, and one webhook
// configuration whose rules come from the Watcher objects. It removes them
// with the Kyma, and removes the webhook configuration while reporting is
// paused for the runtime. It also keeps Watcher status and creates the
// default Watcher.
package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// runtimeIDAnnotation records, on the control-plane credentials Secret, the
// runtime id its client certificate was issued for. Runtime ids need not be
// valid label values, so it is an annotation.
const runtimeIDAnnotation = "operator.kyma-project.io/runtime-id"

// AgentOptions configure the AgentReconciler.
type AgentOptions struct {
	// Namespace holds Kymas and Watchers in the control plane.
	Namespace string
	// PKINamespace holds the CA and each runtime's credentials.
	PKINamespace string
	// SyncNamespace is where the agent lives in a runtime, unless the Kyma
	// names its own.
	SyncNamespace string
	// Validity and RenewFraction govern the runtime certificates.
	Validity      time.Duration
	RenewFraction float64
	// ListenerURL is how agents in runtimes reach the listener.
	ListenerURL string
	// Image is the runtime-watcher image.
	Image string
	// LocalURL, when it returns a URL for a Kyma, says that the Kyma's agent
	// runs outside its runtime (tests, dev environment) at that base URL: the
	// webhook calls it there and no Deployment or Service is rendered.
	LocalURL func(*v1beta2.Kyma) string
	// Paused selects Kymas whose reporting is paused, in addition to
	// v1beta2.WatcherPausedLabel; nil selects none.
	Paused labels.Selector
	// Resync is how often a runtime's agent resources are checked for drift.
	Resync time.Duration
	// ReconcileTimeout bounds one reconcile (not its final patch); zero
	// means none.
	ReconcileTimeout time.Duration
	// ModuleResources adds the built-in rules that report changes of the
	// Kyma's module resources (spec, deletion and status), so that a
	// module's readiness and drift reach its Manifest at once.
	ModuleResources bool
}

// AgentReconciler keeps the agent of each Kyma's runtime.
type AgentReconciler struct {
	// Client is the manager's client, cached for the control-plane namespace.
	Client client.Client
	// PKIClient reads and writes credentials in the PKI namespace, which the
	// manager's cache does not cover.
	PKIClient client.Client
	Runtimes  remote.Runtimes
	CA        *pki.CA
	Recorder  events.EventRecorder
	// Pause is the operator's pause policy (skip-reconciliation label and
	// paused label groups): no work is done for a paused Kyma's runtime,
	// the watcher's included.
	Pause   pause.Policy
	Options AgentOptions

	// events reports failures (rate limited) and changes on the Kyma; set
	// up from Recorder by SetupWithManager.
	events *reconciler.Events
}

// agentController names the agent controller in metrics and runtime slots.
const agentController = "watcher-agent"

// Reconcile runs the one reconcile skeleton on a Kyma: the runtime slot and
// the deadline; the watcher's removal when the Kyma is deleted (paused or
// not), else nothing while work on the runtime is paused, else the
// finalizer and the agent. The Kyma's status belongs to the Kyma controller,
// so this controller records nothing there: its outcomes drive requeueing,
// and their errors become Warning events on the Kyma.
func (r *AgentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kyma := &v1beta2.Kyma{}
	if err := r.Client.Get(ctx, req.NamespacedName, kyma); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without our finalizer (it raced with another writer): at
			// least the control-plane credentials go.
			return ctrl.Result{}, r.deleteCredentials(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	return reconciler.Run(ctx, r.Client, kyma, reconciler.Phases[*v1beta2.Kyma]{
		Controller: agentController,
		Finalizer:  v1beta2.WatcherFinalizer,
		Gate: func(_ context.Context, kyma *v1beta2.Kyma) (func(), time.Duration) {
			return remote.Gate(r.Runtimes, agentController, kyma.Name, kyma.Namespace+"/"+kyma.Name, nil)
		},
		Deadline:  r.Options.ReconcileTimeout,
		Paused:    r.Pause.Paused,
		Delete:    r.finalize,
		Reconcile: r.reconcile,
		// Nothing is written to the Kyma's status, see above.
		Record: func(*v1beta2.Kyma, reconciler.Outcome) {},
		Status: func(*v1beta2.Kyma) any { return nil },
		Events: r.events,
	})
}

// reconcile keeps the runtime's certificates, then, unless reporting is
// paused for the runtime (its webhook configuration is removed then), the
// agent and the webhook configuration in the runtime.
func (r *AgentReconciler) reconcile(ctx context.Context, kyma *v1beta2.Kyma) reconciler.Outcome {
	runtimeID := kyma.Labels[v1beta2.RuntimeIDLabel]
	if runtimeID == "" {
		// Without a runtime id there is no identity to issue a certificate
		// for; a label change brings the Kyma back.
		ctrl.LoggerFrom(ctx).V(1).Info("Kyma has no runtime id label; no watcher", "label", v1beta2.RuntimeIDLabel)
		if err := r.removeWebhook(ctx, kyma); err != nil {
			return runtimeFailure(err, ReasonRemovalFailed, "Removing the runtime watcher's webhook configuration failed")
		}
		return reconciler.Ready(ReasonNoRuntimeID, "The Kyma has no runtime id label; the runtime is not watched", 0)
	}

	creds, err := r.ensureCredentials(ctx, kyma, runtimeID)
	if err != nil {
		return reconciler.Retry(ReasonControlPlaneFailed, "Keeping the runtime's watcher certificates failed ("+reconciler.Cause(err)+")", err)
	}
	next := min(requeue.Jitter(r.Options.Resync, 0.1), max(time.Until(creds.RenewAt), time.Second))

	if Paused(kyma, r.Options.Paused) {
		if err := r.removeWebhook(ctx, kyma); err != nil {
			return runtimeFailure(err, ReasonRemovalFailed, "Removing the runtime watcher's webhook configuration failed")
		}
		return reconciler.Ready(ReasonReportingPaused, "Reporting is paused; the runtime's webhook configuration is removed", next)
	}

	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if errors.Is(err, remote.ErrNoKubeconfigSecret) {
		// The Secret's creation brings the Kyma back.
		ctrl.LoggerFrom(ctx).V(1).Info("No kubeconfig Secret for the runtime yet")
		return reconciler.Progressing(ReasonWaitingForKubeconfig, "Waiting for the runtime's kubeconfig Secret", next)
	}
	if err != nil {
		return runtimeFailure(err, ReasonRuntimeUnavailable, "Connecting to the runtime failed")
	}
	return r.configure(ctx, kyma, cluster, creds.Data, next)
}

// configure applies the agent's resources and the webhook configuration
// rendered from the valid Watchers, or removes the webhook configuration
// when no Watcher is valid.
func (r *AgentReconciler) configure(ctx context.Context, kyma *v1beta2.Kyma, cluster *remote.Cluster, creds map[string][]byte, next time.Duration) reconciler.Outcome {
	watchers := &v1beta2.WatcherList{}
	if err := r.Client.List(ctx, watchers, client.InNamespace(r.Options.Namespace)); err != nil {
		return reconciler.Retry(ReasonControlPlaneFailed, "Listing the Watchers failed ("+reconciler.Cause(err)+")", fmt.Errorf("listing Watchers: %w", err))
	}
	in := renderInput{
		Kyma: kyma, Namespace: r.syncNamespace(kyma), Credentials: creds, Watchers: watchers.Items,
		ListenerURL: r.Options.ListenerURL, Image: r.Options.Image, ModuleResources: r.Options.ModuleResources,
	}
	if r.Options.LocalURL != nil {
		in.LocalURL = r.Options.LocalURL(kyma)
	}
	objects, webhook := render(in)
	if webhook != nil {
		objects = append(objects, webhook)
	}
	unstructured, err := toUnstructured(cluster.Client.Scheme(), objects...)
	if err != nil {
		return reconciler.Retry(ReasonApplyFailed, "Rendering the runtime watcher failed", err)
	}
	result, err := cluster.Applier().Apply(ctx, unstructured)
	if err != nil {
		r.Runtimes.EvictOnError(kyma.Name, err)
		return runtimeFailure(fmt.Errorf("applying the runtime watcher: %w", err), ReasonApplyFailed, "Applying the runtime watcher failed")
	}
	if webhook == nil {
		if err := r.removeWebhookFrom(ctx, cluster.Client, in.Namespace); err != nil {
			return runtimeFailure(err, ReasonRemovalFailed, "Removing the runtime watcher's webhook configuration failed")
		}
	}
	if result.Changed > 0 {
		r.events.Normal(kyma, ReasonConfigured, fmt.Sprintf("Configured the runtime watcher (%d objects changed)", result.Changed))
	}
	return reconciler.Ready(ReasonConfigured, "The runtime watcher is configured", next)
}

// ensureCredentials keeps the runtime's certificates in the PKI namespace and
// returns them.
func (r *AgentReconciler) ensureCredentials(ctx context.Context, kyma *v1beta2.Kyma, runtimeID string) (pki.RuntimeCredentials, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: r.Options.PKINamespace, Name: CredentialsSecretName(kyma.Name)}
	err := r.PKIClient.Get(ctx, key, secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return pki.RuntimeCredentials{}, fmt.Errorf("reading the runtime's watcher credentials: %w", err)
	}
	exists := err == nil
	names, ips := servingNames(r.syncNamespace(kyma))
	creds, err := r.CA.EnsureRuntime(secret.Data, runtimeID, pki.RuntimePolicy{
		Validity: r.Options.Validity, RenewFraction: r.Options.RenewFraction, ServingDNSNames: names, ServingIPs: ips,
	}, time.Now())
	if err != nil {
		return pki.RuntimeCredentials{}, err
	}
	if exists && len(creds.Reissued) == 0 && maps.EqualFunc(secret.Data, creds.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return creds, nil
	}
	secret.Namespace, secret.Name = key.Namespace, key.Name
	secret.Labels = map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: kyma.Name}
	secret.Annotations = map[string]string{runtimeIDAnnotation: runtimeID}
	secret.Type = corev1.SecretTypeOpaque
	secret.Data = creds.Data
	if exists {
		err = r.PKIClient.Update(ctx, secret)
	} else {
		err = r.PKIClient.Create(ctx, secret)
	}
	if err != nil {
		return pki.RuntimeCredentials{}, fmt.Errorf("storing the runtime's watcher credentials: %w", err)
	}
	r.events.Normal(kyma, ReasonCertificateIssued, "Issued "+strings.Join(creds.Reissued, "; "))
	ctrl.LoggerFrom(ctx).Info("Issued watcher certificates", "runtimeID", runtimeID, "why", creds.Reissued, "renewAt", creds.RenewAt)
	return creds, nil
}

// finalize removes the agent from the runtime and the credentials from the
// control plane; Done lets the skeleton remove the finalizer. A runtime that
// cannot be reached is not waited for: its agent's certificate is refused as
// soon as the Kyma is gone, and the webhook fails open.
func (r *AgentReconciler) finalize(ctx context.Context, kyma *v1beta2.Kyma) reconciler.Outcome {
	if err := r.uninstall(ctx, kyma); err != nil {
		if !unreachable(err) {
			return runtimeFailure(err, ReasonRemovalFailed, "Removing the runtime watcher failed")
		}
		ctrl.LoggerFrom(ctx).Info("Leaving the runtime watcher in an unreachable runtime", "error", err.Error())
	}
	if err := r.deleteCredentials(ctx, kyma.Name); err != nil {
		return reconciler.Retry(ReasonControlPlaneFailed, "Deleting the runtime's watcher certificates failed ("+reconciler.Cause(err)+")", err)
	}
	return reconciler.Done()
}

func (r *AgentReconciler) uninstall(ctx context.Context, kyma *v1beta2.Kyma) error {
	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if err != nil {
		return err
	}
	ns := r.syncNamespace(kyma)
	// The webhook goes first, so the runtime's API stops calling the agent.
	if err := r.removeWebhookFrom(ctx, cluster.Client, ns); err != nil {
		return err
	}
	objects, _ := render(renderInput{Kyma: kyma, Namespace: ns})
	// The namespace is shared with everything else the operator puts there.
	objects = objects[1:]
	unstructured, err := toUnstructured(cluster.Client.Scheme(), objects...)
	if err != nil {
		return err
	}
	if _, err := cluster.Applier().Delete(ctx, apply.InventoryOf(unstructured)); err != nil {
		r.Runtimes.EvictOnError(kyma.Name, err)
		return fmt.Errorf("removing the runtime watcher: %w", err)
	}
	return nil
}

// removeWebhook removes the runtime's webhook configuration if the runtime
// is registered; the agent's other resources stay, idle.
func (r *AgentReconciler) removeWebhook(ctx context.Context, kyma *v1beta2.Kyma) error {
	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if err != nil {
		if errors.Is(err, remote.ErrNoKubeconfigSecret) {
			return nil
		}
		return err
	}
	return r.removeWebhookFrom(ctx, cluster.Client, r.syncNamespace(kyma))
}

func (r *AgentReconciler) removeWebhookFrom(ctx context.Context, c client.Client, namespace string) error {
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := c.Get(ctx, client.ObjectKey{Name: webhookConfigName(namespace)}, webhook)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the runtime watcher's webhook configuration: %w", err)
	}
	if webhook.Labels[v1beta2.ManagedByLabel] != v1beta2.ManagedByValue {
		return nil // not ours
	}
	if err := c.Delete(ctx, webhook, client.Preconditions{UID: &webhook.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the runtime watcher's webhook configuration: %w", err)
	}
	return nil
}

func (r *AgentReconciler) deleteCredentials(ctx context.Context, kymaName string) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Options.PKINamespace, Name: CredentialsSecretName(kymaName)}}
	if err := r.PKIClient.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the runtime's watcher credentials: %w", err)
	}
	return nil
}

func (r *AgentReconciler) syncNamespace(kyma *v1beta2.Kyma) string {
	if kyma.Spec.SyncNamespace != "" {
		return kyma.Spec.SyncNamespace
	}
	return r.Options.SyncNamespace
}

// Paused reports whether reporting is paused for the Kyma's runtime: by
// v1beta2.WatcherPausedLabel or by the operator's selector of paused label groups.
func Paused(kyma *v1beta2.Kyma, selector labels.Selector) bool {
	if kyma.Labels[v1beta2.WatcherPausedLabel] == "true" {
		return true
	}
	return selector != nil && !selector.Empty() && selector.Matches(labels.Set(kyma.Labels))
}

// Reporting reports whether the Kyma's runtime is expected to report
// changes: work on it is not paused by the operator's policy (then the
// watcher leaves it alone too) and reporting is not paused for it (Paused).
// The listener's fallback looks after only these runtimes when they go
// silent.
func Reporting(kyma *v1beta2.Kyma, work pause.Policy, reporting labels.Selector) bool {
	return !work.Paused(kyma) && !Paused(kyma, reporting)
}

// CredentialsSecretName names the control-plane Secret with a Kyma's runtime
// credentials; names too long for a Secret are shortened with a hash.
func CredentialsSecretName(kymaName string) string {
	name := "watcher-" + kymaName
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:240] + "-" + hex.EncodeToString(sum[:])[:12]
}
