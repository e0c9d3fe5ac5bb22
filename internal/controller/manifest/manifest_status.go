package manifest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// Reasons of the Manifest's Ready (and Stalled) condition. Stable:
// dashboards and alerts key on them. /work/wt/notes/status-manifest.md (and
// docs/status.md) say what each means and what to do.
const (
	// ReasonReady: the module is installed, its manager and its default
	// custom resource are ready.
	ReasonReady = "Ready"
	// ReasonProcessing: applied; the manager or the default custom resource
	// is not ready yet.
	ReasonProcessing = "Processing"
	// ReasonRuntimeUnavailable: the runtime cannot be reached or used.
	ReasonRuntimeUnavailable = "RuntimeUnavailable"
	// ReasonKubeconfigRefused: the runtime's kubeconfig asks for more than
	// inline credentials; nothing is tried until its Secret changes.
	ReasonKubeconfigRefused = "KubeconfigRefused"
	// ReasonContentFailed: the content cannot be fetched or rendered;
	// nothing was applied or pruned.
	ReasonContentFailed = "ContentFailed"
	// ReasonSignatureInvalid: the content comes from a registry that
	// requires signatures (--require-signatures) and is unsigned, or signed
	// with no trusted key; nothing was applied or pruned.
	ReasonSignatureInvalid = "SignatureInvalid"
	// ReasonOwnershipConflict: the content names objects that exist and are
	// not the module's; nothing was applied.
	ReasonOwnershipConflict = "OwnershipConflict"
	// ReasonApplyFailed: applying to the runtime failed.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonPruneFailed: removing what a new version no longer ships failed.
	ReasonPruneFailed = "PruneFailed"
	// ReasonReadinessFailed: the manager or the custom resource could not be
	// read.
	ReasonReadinessFailed = "ReadinessCheckFailed"
	// ReasonModuleError: the module's manager failed or its custom resource
	// reports Error.
	ReasonModuleError = "ModuleError"
	// ReasonDeletingCustomResources: the module's own custom resources are
	// being finalized by its operator.
	ReasonDeletingCustomResources = "DeletingCustomResources"
	// ReasonWaitingForCustomResources: custom resources of the module's
	// CRDs that are not the module's block its removal.
	ReasonWaitingForCustomResources = "WaitingForCustomResources"
	// ReasonWaitingForNamespace: a Namespace the module created waits for
	// other modules being removed to leave it.
	ReasonWaitingForNamespace = "WaitingForNamespace"
	// ReasonDeleteFailed: removing from the runtime failed.
	ReasonDeleteFailed = "DeleteFailed"
	// ReasonAccessRefused: the runtime refused a write to the module's
	// identity (its content asks for more than its template declares), or
	// the module declares no RBAC and the operator refuses such modules.
	ReasonAccessRefused = "AccessRefused"
)

// maxNamed is how many objects a condition message names at most.
const maxNamed = 5

// record writes o into the Manifest's status (kstatus conditions, the state
// derived from them, observedGeneration) and, when the state or the Ready
// condition changed, status.lastOperation (KLM-compatible).
func record(manifest *v1beta2.Manifest, o reconciler.Outcome, now time.Time) {
	before := readyCondition(manifest)
	state := manifest.Status.State
	reconciler.Record(reconciler.Status{
		Conditions:         &manifest.Status.Conditions,
		State:              &manifest.Status.State,
		ObservedGeneration: &manifest.Status.ObservedGeneration,
	}, manifest.Generation, o)
	if o.Reason == ReasonModuleError {
		// The spec was applied in full; the module itself reports the
		// error.
		manifest.Status.ObservedGeneration = manifest.Generation
	}
	after := readyCondition(manifest)
	if state != manifest.Status.State || before.Reason != after.Reason || before.Message != after.Message {
		op := after.Message
		if op == "" {
			op = string(manifest.Status.State)
		}
		manifest.Status.LastOperation = v1beta2.LastOperation{Operation: op, LastUpdateTime: metav1.NewTime(now)}
	}
}

func readyCondition(manifest *v1beta2.Manifest) metav1.Condition {
	if c := meta.FindStatusCondition(manifest.Status.Conditions, v1beta2.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// readinessOutcome maps what the runtime reported to the Manifest's
// outcome. A module in Error is polled at the Error interval, not backed
// off: it is the module's operator that reports it, and it may recover at
// any moment.
func readinessOutcome(readiness apply.Readiness, intervals requeue.Intervals) reconciler.Outcome {
	switch readiness.State {
	case v1beta2.StateReady:
		return reconciler.Ready(ReasonReady, "Module is installed and ready", intervals.After(v1beta2.StateReady))
	case v1beta2.StateWarning:
		return reconciler.Warning(readiness.Message, intervals.After(v1beta2.StateWarning))
	case v1beta2.StateError:
		return reconciler.RetryAfter(ReasonModuleError, readiness.Message, intervals.After(v1beta2.StateError), nil)
	default:
		return reconciler.Progressing(ReasonProcessing, readiness.Message, intervals.After(v1beta2.StateProcessing))
	}
}

func runtimeUnavailable(err error) reconciler.Outcome {
	return reconciler.Retry(ReasonRuntimeUnavailable, fmt.Sprintf(
		"The runtime cannot be reached or used: %s. Retrying with backoff; the Kyma's status and the Manifest's events give the error",
		reconciler.Cause(err)), err)
}

// kubeconfigRefused is terminal for this Manifest until its runtime's
// Secret changes; the Manifest does not watch Secrets, so it looks again at
// the Error interval.
func kubeconfigRefused(err error, intervals requeue.Intervals) reconciler.Outcome {
	o := reconciler.Stalled(ReasonKubeconfigRefused,
		"The runtime's kubeconfig Secret is refused: it asks for more than inline credentials. The Kyma's status names the field and what to use instead", err)
	o.After = intervals.After(v1beta2.StateError)
	return o
}

func contentFailed(err error) reconciler.Outcome {
	return reconciler.Retry(ReasonContentFailed, fmt.Sprintf(
		"The module's content cannot be fetched or rendered: %s. What is installed stays installed; publish fixed content or fix the template's link. The Manifest's events give the error",
		contentCause(err)), err)
}

// signatureInvalid is terminal for this content: only a signature pushed
// to the registry, or another link, fixes it, and neither is watched, so
// the Manifest looks again at the Error interval (without backoff). ok is
// false when err is no signature refusal.
func signatureInvalid(err error, intervals requeue.Intervals) (o reconciler.Outcome, ok bool) {
	var sigErr *signing.Error
	if !errors.As(err, &sigErr) {
		return reconciler.Outcome{}, false
	}
	problem := "has no signature"
	if errors.Is(sigErr, signing.ErrUntrusted) {
		problem = "is signed, but with no key the operator trusts for its registry"
	}
	part := "content"
	var partErr *content.PartError
	if errors.As(err, &partErr) {
		part = partErr.Part
	}
	o = reconciler.Stalled(ReasonSignatureInvalid, fmt.Sprintf(
		"The module's %s from %s %s, and the operator requires signed content from this registry (--require-signatures). Sign the module's OCI artifact with a trusted key (lmctl module sign REF --key FILE, or cosign sign --key), or have the SRE add its public key. Nothing was applied or pruned; what is installed stays installed",
		part, sigErr.Repository, problem), err)
	o.After = intervals.After(v1beta2.StateError)
	return o, true
}

// contentCause is a stable description of why content failed, for the
// condition: the error's class, never its text, which quotes registries,
// links and charts and goes to events.
func contentCause(err error) string {
	var registryErr *ociartifact.RegistryError
	var refused *render.RefusedError
	var part *content.PartError
	switch {
	case errors.As(err, &registryErr) && registryErr.StatusCode == http.StatusUnauthorized:
		return "the registry answered 401 Unauthorized: the registry needs credentials: give the operator a --registry-credentials-secret that holds valid ones for this host"
	case errors.As(err, &registryErr):
		return fmt.Sprintf("the registry answered %d %s", registryErr.StatusCode, http.StatusText(registryErr.StatusCode))
	case errors.Is(err, ociartifact.ErrTooLarge):
		return "the content is larger than the size limit (--content-max-bytes)"
	case errors.As(err, &refused):
		return renderRefusedCause(refused)
	case errors.Is(err, render.ErrNoRenderProcess):
		return "the operator's binary cannot start Helm render processes (render.ServeIfRenderProcess is not called)"
	case errors.As(err, &part) && part.Stage == content.StageRender:
		return "the " + part.Part + " part does not render into Kubernetes objects (YAML that does not parse, an object without apiVersion, kind or name, or a chart that fails)"
	case errors.As(err, &part):
		if cause := reconciler.Cause(part.Err); cause != "failed" {
			return "fetching the " + part.Part + " part failed: " + cause
		}
		return "fetching the " + part.Part + " part failed"
	default:
		return reconciler.Cause(err)
	}
}

// ownershipConflict names the objects in the conflict: the message is the
// operator's own, made from object names and holders (stable while the
// conflict lasts), not an error text of the runtime.
func ownershipConflict(conflict *apply.ConflictError, intervals requeue.Intervals) reconciler.Outcome {
	o := reconciler.Stalled(ReasonOwnershipConflict, conflict.Error(), conflict)
	o.After = intervals.After(v1beta2.StateError)
	return o
}

// failedMessage is the condition message of a failed step: what failed,
// the error's class, and that the Manifest's events give the error.
func failedMessage(what string, err error) string {
	return fmt.Sprintf("%s failed: %s. Retrying with backoff; the Manifest's events give the error", what, reconciler.Cause(err))
}

func defaultCRUnknownMessage(err error) string {
	if meta.IsNoMatchError(err) {
		return "The kind of the module's default custom resource is not served in the runtime: the module's content must ship its CRD"
	}
	return failedMessage("Looking up the kind of the module's default custom resource", err)
}

// blockedByCustomResources names, in a stable order, up to maxNamed of the
// custom resources that are not the module's and keep it from being
// removed, with how many there are.
func blockedByCustomResources(others []v1beta2.Resource, after time.Duration) reconciler.Outcome {
	return reconciler.Deleting(ReasonWaitingForCustomResources, fmt.Sprintf(
		"Waiting for %d custom resources that are not the module's to be deleted by their owners: %s. Removing the module would delete them with its CRDs",
		len(others), apply.Describe(others, maxNamed)), after)
}

func finalizingCustomResources(own []v1beta2.Resource, after time.Duration) reconciler.Outcome {
	return reconciler.Deleting(ReasonDeletingCustomResources, fmt.Sprintf(
		"Waiting for the module's operator to finalize %d of the module's custom resources: %s",
		len(own), apply.Describe(own, maxNamed)), after)
}

func waitingForNamespaces(namespaces []string, after time.Duration) reconciler.Outcome {
	return reconciler.Deleting(ReasonWaitingForNamespace, fmt.Sprintf(
		"Waiting for other modules being removed to leave namespace %s", strings.Join(namespaces, ", ")), after)
}

// moduleReadiness combines the manager workload and the module CR: the
// module is as ready as the less ready of the two.
func moduleReadiness(ctx context.Context, c client.Reader, manifest *v1beta2.Manifest, cr *unstructured.Unstructured, syncNamespace string) (apply.Readiness, error) {
	manager, err := apply.ManagerReadiness(ctx, c, manifest.Spec.Manager, syncNamespace)
	if err != nil {
		return apply.Readiness{}, err
	}
	if manager.State != v1beta2.StateReady {
		return manager, nil
	}
	return apply.CustomResourceReadiness(ctx, c, cr)
}

// defaultCustomResource is the module's default CR when the Manifest's policy
// is CreateAndDelete, placed in the sync namespace when it is namespaced and
// names none.
func defaultCustomResource(manifest *v1beta2.Manifest, syncNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) (*unstructured.Unstructured, error) {
	if manifest.Spec.Resource == nil || manifest.Spec.CustomResourcePolicy == v1beta2.CustomResourcePolicyIgnore {
		return nil, nil
	}
	cr := manifest.Spec.Resource.DeepCopy()
	if cr.GetName() == "" {
		// As the Kyma API names it (KLM: after the Manifest); a module
		// taken over keeps the name KLM gave it, after KLM's Manifest.
		cr.SetName(manifest.Name)
		if t := manifest.Status.TakenOver; t != nil {
			cr.SetName(t.Manifest)
		}
	}
	if cr.GetNamespace() == "" {
		isNamespaced, err := namespaced(cr.GroupVersionKind())
		if err != nil {
			return nil, fmt.Errorf("looking up kind %s of the default custom resource: %w", cr.GroupVersionKind(), err)
		}
		if isNamespaced {
			cr.SetNamespace(syncNamespace)
		}
	}
	labels := cr.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1beta2.ManagedByLabel] = v1beta2.ManagedByValue
	labels[v1beta2.KymaNameLabel] = kymaName(manifest)
	labels[v1beta2.ModuleNameLabel] = manifest.Spec.ModuleName
	cr.SetLabels(labels)
	return cr, nil
}
