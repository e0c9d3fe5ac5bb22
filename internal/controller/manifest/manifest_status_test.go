package manifest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

var testIntervals = requeue.Intervals{Ready: time.Minute, Processing: 2 * time.Second, Error: 30 * time.Second, Warning: 20 * time.Second}

// TestReadinessOutcome checks what the runtime's report of a module becomes:
// a module in Error is an Error (Reconciling=ProgressingWithRetry) that is
// polled at the Error interval, without an error that would back it off.
func TestReadinessOutcome(t *testing.T) {
	tests := []struct {
		name       string
		readiness  apply.Readiness
		wantState  v1beta2.State
		wantReason string
		wantAfter  time.Duration
		wantReady  bool
	}{
		{name: "ready", readiness: apply.Readiness{State: v1beta2.StateReady}, wantState: v1beta2.StateReady, wantReason: ReasonReady, wantAfter: time.Minute, wantReady: true},
		{name: "manager not yet available", readiness: apply.Readiness{State: v1beta2.StateProcessing, Message: "Deployment x is not ready"}, wantState: v1beta2.StateProcessing, wantReason: ReasonProcessing, wantAfter: 2 * time.Second},
		{name: "warning", readiness: apply.Readiness{State: v1beta2.StateWarning, Message: "w"}, wantState: v1beta2.StateWarning, wantReason: v1beta2.ReasonWarning, wantAfter: 20 * time.Second, wantReady: true},
		{name: "module error is polled", readiness: apply.Readiness{State: v1beta2.StateError, Message: "Sample kyma-system/default reports Error"}, wantState: v1beta2.StateError, wantReason: ReasonModuleError, wantAfter: 30 * time.Second},
		{name: "deleting CR counts as processing", readiness: apply.Readiness{State: v1beta2.StateDeleting, Message: "d"}, wantState: v1beta2.StateProcessing, wantReason: ReasonProcessing, wantAfter: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			o := readinessOutcome(tt.readiness, testIntervals)
			record(m, o, time.Now())
			g.Expect(m.Status.State).To(Equal(tt.wantState))
			cond := meta.FindStatusCondition(m.Status.Conditions, v1beta2.ConditionReady)
			g.Expect(cond.Reason).To(Equal(tt.wantReason))
			g.Expect(cond.Status == metav1.ConditionTrue).To(Equal(tt.wantReady))
			g.Expect(m.Status.LastOperation.Operation).NotTo(BeEmpty())
			g.Expect(m.Status.ObservedGeneration).To(Equal(int64(2)), "the spec was applied in full")
			res, err := o.Result()
			g.Expect(err).NotTo(HaveOccurred(), "no backoff")
			g.Expect(res.RequeueAfter).To(Equal(tt.wantAfter))
		})
	}
	g := NewWithT(t)
	m := &v1beta2.Manifest{}
	record(m, readinessOutcome(apply.Readiness{State: v1beta2.StateError, Message: "e"}, testIntervals), time.Now())
	g.Expect(meta.FindStatusCondition(m.Status.Conditions, v1beta2.ConditionReconciling)).To(HaveField("Reason", v1beta2.ReasonProgressingWithRetry))
}

func TestRecordDoesNotTouchLastOperationWhenUnchanged(t *testing.T) {
	g := NewWithT(t)
	m := &v1beta2.Manifest{}
	record(m, contentFailed(errors.New("fetching: boom")), time.Now())
	first := m.Status.DeepCopy()
	record(m, contentFailed(errors.New("fetching: another boom")), time.Now())
	g.Expect(m.Status).To(Equal(*first), "a repeated failure with new error text does not change the status")
	g.Expect(m.Status.ObservedGeneration).To(BeZero(), "a spec that could not be applied is not observed")
}

// TestConditionMessagesCarryNoErrorText gives every failure an error whose
// text changes from one attempt to the next, and checks that the condition
// says the error's class, stays the same, and quotes none of the text.
func TestConditionMessagesCarryNoErrorText(t *testing.T) {
	registryErr := func(code int) error {
		return fmt.Errorf("link oci://127.0.0.1:5000/m@sha256:abc from secret-host: %w", &ociartifact.RegistryError{StatusCode: code})
	}
	tests := []struct {
		name    string
		outcome func(err error) reconciler.Outcome
		err     func(attempt int) error
		want    string
	}{
		{"runtime unreachable", runtimeUnavailable, func(i int) error { return fmt.Errorf("dial tcp 10.0.0.%d:443: %w", i, &netError{}) }, "connection failed"},
		{"content: registry error", contentFailed, func(int) error { return registryErr(http.StatusInternalServerError) }, "the registry answered 500 Internal Server Error"},
		{"content: credentials", contentFailed, func(int) error { return registryErr(http.StatusUnauthorized) }, "--registry-credentials-secret"},
		{"content: too large", contentFailed, func(i int) error { return fmt.Errorf("%w: %d bytes", ociartifact.ErrTooLarge, i) }, "larger than the size limit"},
		{"content: chart loops, then is refused", contentFailed, func(i int) error {
			return fmt.Errorf("chart x: %w", &render.RefusedError{Refusal: v1beta2.RenderRefusal{
				Digest: fmt.Sprintf("sha256:%064d", i), Reason: v1beta2.RenderRefusalDeadline, Limit: fmt.Sprintf("%ds", i)}})
		}, "rendering the Helm chart was stopped at the render deadline (--helm-render-deadline)"},
		{"content: chart refused as it looped before", contentFailed, func(i int) error {
			return fmt.Errorf("chart x: %w", &render.RefusedError{Refusal: v1beta2.RenderRefusal{
				Digest: fmt.Sprintf("sha256:%064d", i), Reason: v1beta2.RenderRefusalDeadline, Limit: fmt.Sprintf("%ds", i)}, Before: true})
		}, "refused without rendering: a render of the same chart and values was stopped at the render deadline (--helm-render-deadline) before"},
		{"content: chart needs too much memory", contentFailed, func(i int) error {
			return &render.RefusedError{Refusal: v1beta2.RenderRefusal{Reason: v1beta2.RenderRefusalMemory, Limit: fmt.Sprintf("%dMi", i)}}
		}, "stopped at the render memory limit (--helm-max-render-memory-bytes)"},
		{"content: chart renders too much", contentFailed, func(i int) error {
			return &render.RefusedError{Refusal: v1beta2.RenderRefusal{Reason: v1beta2.RenderRefusalOutput, Limit: fmt.Sprintf("%dMi", i)}}
		}, "stopped at the rendered output limit (--helm-max-output-bytes)"},
		{"content: render", contentFailed, func(i int) error { return fmt.Errorf("chart %q: line %d: boom", "x", i) }, "cannot be fetched or rendered: failed"},
		{"apply", func(err error) reconciler.Outcome {
			return reconciler.Retry(ReasonApplyFailed, failedMessage("Applying", err), err)
		},
			func(i int) error { return fmt.Errorf("patch %d: %w", i, context.DeadlineExceeded) }, "Applying failed: timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			first, second := tt.outcome(tt.err(1)), tt.outcome(tt.err(2))
			g.Expect(first.Message).To(Equal(second.Message), "stable across attempts")
			g.Expect(first.Message).To(ContainSubstring(tt.want))
			for _, raw := range []string{"10.0.0.1", "127.0.0.1", "secret-host", "line 1", "patch 1", "sha256:", "1s", "1Mi"} {
				g.Expect(first.Message).NotTo(ContainSubstring(raw))
			}
			g.Expect(first.Err).To(MatchError(tt.err(1).Error()), "the raw error goes to events")
		})
	}
}

type netError struct{}

func (*netError) Error() string   { return "connect: connection refused" }
func (*netError) Timeout() bool   { return false }
func (*netError) Temporary() bool { return false }

// TestBlockedInterval checks the backoff of a removal that other people's
// custom resources block: it waits as long as it has waited already, so
// looks double in spacing, from the Deleting interval to the cap.
func TestBlockedInterval(t *testing.T) {
	const base, ceiling = 2 * time.Second, 5 * time.Minute
	tests := []struct {
		waited, want time.Duration
	}{
		{0, base},
		{time.Second, base},
		{3 * time.Second, 3 * time.Second},
		{40 * time.Second, 40 * time.Second},
		{time.Hour, ceiling},
		{48 * time.Hour, ceiling},
	}
	for _, tt := range tests {
		t.Run(tt.waited.String(), func(t *testing.T) {
			NewWithT(t).Expect(blockedInterval(tt.waited, base, ceiling)).To(Equal(tt.want))
		})
	}
	NewWithT(t).Expect(blockedInterval(0, time.Hour, time.Minute)).To(Equal(time.Hour), "a cap below the base does not shorten it")

	r := &Reconciler{Intervals: requeue.Intervals{Processing: base, Jitter: 0.2}}
	m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: time.Now().Add(-10 * time.Minute)}}}
	NewWithT(t).Expect(r.blockedRequeue(m)).To(And(BeNumerically(">=", ceiling), BeNumerically("<", ceiling*12/10)), "jittered above the cap")
}

// TestBlockedMessageNamesUpToFive checks the message of a removal blocked
// by other people's custom resources: how many, and up to five named.
func TestBlockedMessageNamesUpToFive(t *testing.T) {
	g := NewWithT(t)
	var others []v1beta2.Resource
	for i := range 7 {
		others = append(others, v1beta2.Resource{
			GroupVersionKind: metav1.GroupVersionKind{Group: "operator.kyma-project.io", Version: "v1alpha1", Kind: "Sample"},
			Namespace:        "team", Name: fmt.Sprintf("users-%d", i),
		})
	}
	o := blockedByCustomResources(others, time.Second)
	g.Expect(o.Kind).To(Equal(reconciler.KindDeleting))
	g.Expect(o.Reason).To(Equal(ReasonWaitingForCustomResources))
	g.Expect(o.Message).To(ContainSubstring("Waiting for 7 custom resources that are not the module's"))
	g.Expect(o.Message).To(ContainSubstring("Sample team/users-0, Sample team/users-1, Sample team/users-2, Sample team/users-3, Sample team/users-4, and 2 more"))
	g.Expect(o.Message).NotTo(ContainSubstring("users-5"))
	g.Expect(strings.Count(o.Message, "Sample ")).To(Equal(5))
}

func TestDefaultCustomResource(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Sample", "metadata": map[string]any{"name": "default"},
	}}
	namespaced := func(schema.GroupVersionKind) (bool, error) { return true, nil }
	clusterScoped := func(schema.GroupVersionKind) (bool, error) { return false, nil }
	tests := []struct {
		name    string
		policy  v1beta2.CustomResourcePolicy
		scope   func(schema.GroupVersionKind) (bool, error)
		wantNil bool
		wantNS  string
	}{
		{name: "create and delete, namespaced", policy: v1beta2.CustomResourcePolicyCreateAndDelete, scope: namespaced, wantNS: "sync-ns"},
		{name: "create and delete, cluster-scoped", policy: v1beta2.CustomResourcePolicyCreateAndDelete, scope: clusterScoped, wantNS: ""},
		{name: "ignore", policy: v1beta2.CustomResourcePolicyIgnore, scope: namespaced, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &v1beta2.Manifest{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1beta2.KymaNameLabel: "k"}},
				Spec:       v1beta2.ManifestSpec{ModuleName: "sample", Resource: cr, CustomResourcePolicy: tt.policy},
			}
			got, err := defaultCustomResource(m, "sync-ns", tt.scope)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.wantNil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got.GetNamespace()).To(Equal(tt.wantNS))
			g.Expect(got.GetLabels()).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue))
			g.Expect(got.GetLabels()).To(HaveKeyWithValue(v1beta2.KymaNameLabel, "k"))
			g.Expect(cr.GetNamespace()).To(BeEmpty(), "the Manifest's copy is not changed")
		})
	}
}

// A default CR without a name is named as the Kyma API (KLM) names it:
// after the Manifest, or after the KLM Manifest a takeover took over, whose
// default CR KLM named so.
func TestDefaultCustomResourceWithoutAName(t *testing.T) {
	g := NewWithT(t)
	unnamed := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Sample"}}
	m := &v1beta2.Manifest{
		ObjectMeta: metav1.ObjectMeta{Name: "k-sample", Labels: map[string]string{v1beta2.KymaNameLabel: "k"}},
		Spec:       v1beta2.ManifestSpec{ModuleName: "sample", Resource: unnamed, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete},
	}
	namespaced := func(schema.GroupVersionKind) (bool, error) { return true, nil }
	got, err := defaultCustomResource(m, "sync-ns", namespaced)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.GetName()).To(Equal("k-sample"))
	m.Status.TakenOver = &v1beta2.TakenOver{Manifest: "k-sample-3123456789"}
	got, err = defaultCustomResource(m, "sync-ns", namespaced)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.GetName()).To(Equal("k-sample-3123456789"))
	g.Expect(unnamed.GetName()).To(BeEmpty(), "the Manifest's copy is not changed")
}

func TestNamespaceUse(t *testing.T) {
	manifest := func(uid string, deleting bool, synced ...v1beta2.Resource) v1beta2.Manifest {
		m := v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		if deleting {
			now := metav1.Now()
			m.DeletionTimestamp = &now
		}
		m.Status.Synced = synced
		return m
	}
	in := func(namespace string) v1beta2.Resource {
		return v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: namespace, Name: "c"}
	}
	namespaceEntry := v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "shared"}
	self := manifest("self", true, in("shared"), namespaceEntry)
	withCR := manifest("cr", false)
	withCR.Spec.Resource = &unstructured.Unstructured{}
	withCR.Spec.Resource.SetNamespace("shared")
	tests := []struct {
		name   string
		others []v1beta2.Manifest
		want   apply.NamespaceUse
	}{
		{name: "alone", others: []v1beta2.Manifest{self}, want: apply.NamespaceFree},
		{name: "others elsewhere", others: []v1beta2.Manifest{self, manifest("b", false, in("other"))}, want: apply.NamespaceFree},
		{name: "another that only ships the Namespace itself does not hold it", others: []v1beta2.Manifest{self, manifest("b", false, namespaceEntry)}, want: apply.NamespaceFree},
		{name: "a staying module has objects in it", others: []v1beta2.Manifest{self, manifest("b", false, in("shared"))}, want: apply.NamespaceInUse},
		{name: "a staying module's default CR is in it", others: []v1beta2.Manifest{self, withCR}, want: apply.NamespaceInUse},
		{name: "only leaving modules have objects in it", others: []v1beta2.Manifest{self, manifest("b", true, in("shared"))}, want: apply.NamespaceInUseByLeaving},
		{name: "a staying one wins over a leaving one", others: []v1beta2.Manifest{manifest("b", true, in("shared")), manifest("c", false, in("shared"))}, want: apply.NamespaceInUse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(namespaceUse(&self, tt.others, "shared")).To(Equal(tt.want))
		})
	}
}

// TestSignatureInvalid checks the outcome of content refused for its
// signature: Stalled (no backoff, looked at again at the Error interval),
// reason SignatureInvalid, a stable message that names the part and the
// repository and says what to do; other content errors are not it.
func TestSignatureInvalid(t *testing.T) {
	refusal := func(kind error, digest string) error {
		return &content.PartError{Stage: content.StageFetch, Part: "rawManifest", Err: &signing.Error{
			Repository: "registry.example.com/modules/x", Digest: digest, Err: kind, Detail: "detail " + digest,
		}}
	}
	tests := []struct {
		name    string
		err     error
		want    string
		wantNot bool
	}{
		{"unsigned", refusal(signing.ErrUnsigned, "sha256:1"), "rawManifest from registry.example.com/modules/x has no signature", false},
		{"other key", refusal(signing.ErrUntrusted, "sha256:1"), "is signed, but with no key the operator trusts", false},
		{"a registry error", fmt.Errorf("listing tags: %w", &ociartifact.RegistryError{StatusCode: 500}), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o, ok := signatureInvalid(tt.err, testIntervals)
			if tt.wantNot {
				g.Expect(ok).To(BeFalse())
				return
			}
			g.Expect(ok).To(BeTrue())
			g.Expect(o.Kind).To(Equal(reconciler.KindStalled))
			g.Expect(o.Reason).To(Equal(ReasonSignatureInvalid))
			g.Expect(o.After).To(Equal(testIntervals.Error))
			g.Expect(o.Message).To(ContainSubstring(tt.want))
			g.Expect(o.Message).To(ContainSubstring("lmctl module sign"))
			g.Expect(o.Message).To(ContainSubstring("what is installed stays installed"))
			g.Expect(o.Message).NotTo(ContainSubstring("sha256:1"), "no digest or detail: the message is stable")
			again, _ := signatureInvalid(refusal(errors.Unwrap(errors.Unwrap(tt.err)), "sha256:2"), testIntervals)
			g.Expect(again.Message).To(Equal(o.Message))
		})
	}
}
