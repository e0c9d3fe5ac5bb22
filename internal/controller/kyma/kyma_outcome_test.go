package kyma

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// testIntervals are distinct, without jitter, so that a test can tell which
// interval an outcome asks for.
var testIntervals = requeue.Intervals{Ready: time.Hour, Processing: time.Second, Error: time.Minute, Warning: 2 * time.Minute}

func modulesIn(states ...v1beta2.State) []v1beta2.ModuleStatus {
	out := make([]v1beta2.ModuleStatus, 0, len(states))
	for i, s := range states {
		out = append(out, v1beta2.ModuleStatus{Name: fmt.Sprintf("m%d", i), State: s})
	}
	return out
}

// TestOutcomeOf checks the Kyma's outcome for each mix of module states and
// runtime errors, and what it reads as once recorded: status.state, kstatus
// (Flux and Argo health checks), `kubectl wait --for=condition=Ready`,
// whether observedGeneration moves, and how it is requeued.
func TestOutcomeOf(t *testing.T) {
	// What a stopped runtime API server gives: the dial's text changes with
	// every address and port, so it must not reach a condition.
	unreachable := fmt.Errorf("reading the runtime's Kyma: %w", &url.Error{Op: "Get", URL: "https://127.0.0.1:40123/apis",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
	refused := fmt.Errorf("%w: Secret kcp-system/k-kubeconfig key %q is refused: %w", remote.ErrInvalidKubeconfig, remote.KubeconfigKey,
		&kubeconfig.FieldError{Field: "users[0].user.exec", Problem: "exec plugins are refused; put inline credentials in the user"})
	garbage := fmt.Errorf("%w: Secret kcp-system/k-kubeconfig key %q %w", remote.ErrInvalidKubeconfig, remote.KubeconfigKey, kubeconfig.ErrUnparsable)
	noSecret := fmt.Errorf("%w: create a Secret", remote.ErrNoKubeconfigSecret)
	writeFailed := fmt.Errorf("writing Manifest k-m: %w", apierrors.NewInternalError(errors.New("etcdserver: request timed out")))

	R, P, E, W, D, U := v1beta2.StateReady, v1beta2.StateProcessing, v1beta2.StateError, v1beta2.StateWarning, v1beta2.StateDeleting, v1beta2.StateUnmanaged
	tests := []struct {
		name       string
		in         observed
		wantReason string
		wantState  v1beta2.State
		wantStatus status.Status
		wantReady  bool // kubectl wait --for=condition=Ready passes
		wantMsg    string
		movesGen   bool          // observedGeneration moves to the generation
		backoff    bool          // an error is returned: the work queue backs off
		terminal   bool          // not retried until an input changes
		wantAfter  time.Duration // RequeueAfter, when not backing off
	}{
		{name: "all Ready", in: observed{Modules: modulesIn(R, R, U)}, wantReason: ReasonReady, wantState: R,
			wantStatus: status.CurrentStatus, wantReady: true, wantMsg: "All modules are ready", movesGen: true, wantAfter: time.Hour},
		{name: "no modules", in: observed{}, wantReason: ReasonReady, wantState: R,
			wantStatus: status.CurrentStatus, wantReady: true, wantMsg: "No modules to install", movesGen: true, wantAfter: time.Hour},
		{name: "a module installing", in: observed{Modules: modulesIn(R, P)}, wantReason: ReasonModulesNotReady, wantState: P,
			wantStatus: status.InProgressStatus, wantMsg: "1 of 2 modules are not ready yet", movesGen: true, wantAfter: time.Second},
		{name: "a module being removed is not Ready", in: observed{Modules: modulesIn(R, D)}, wantReason: ReasonModulesNotReady, wantState: P,
			wantStatus: status.InProgressStatus, wantMsg: "1 being removed", movesGen: true, wantAfter: time.Second},
		{name: "a module in Error is retried at the Error interval, without backoff", in: observed{Modules: modulesIn(R, E, P)},
			wantReason: ReasonModulesFailed, wantState: E, wantStatus: status.InProgressStatus, wantMsg: "1 of 3 modules are in Error", wantAfter: time.Minute},
		{name: "a Warning is Ready with a warning", in: observed{Modules: modulesIn(R, W)}, wantReason: v1beta2.ReasonWarning, wantState: W,
			wantStatus: status.CurrentStatus, wantReady: true, wantMsg: "1 of 2 modules report a warning", movesGen: true, wantAfter: 2 * time.Minute},
		{name: "progress wins over a warning", in: observed{Modules: modulesIn(W, P)}, wantReason: ReasonModulesNotReady, wantState: P,
			wantStatus: status.InProgressStatus, movesGen: true, wantAfter: time.Second},
		{name: "runtime recreating its Kyma", in: observed{Modules: modulesIn(R), Recreating: true}, wantReason: ReasonRuntimeKymaRecreating,
			wantState: P, wantStatus: status.InProgressStatus, movesGen: true, wantAfter: time.Second},
		{name: "runtime unreachable backs off, whatever the modules say", in: observed{Modules: modulesIn(R), RuntimeErr: unreachable},
			wantReason: ReasonRuntimeUnavailable, wantState: E, wantStatus: status.InProgressStatus, wantMsg: "cannot be reached or used (connection failed)", backoff: true},
		{name: "no Secret says what to create", in: observed{RuntimeErr: noSecret}, wantReason: ReasonRuntimeUnavailable, wantState: E,
			wantStatus: status.InProgressStatus, wantMsg: "create the Secret in namespace kcp-system labelled operator.kyma-project.io/kyma-name=k", backoff: true},
		{name: "garbage in the Secret says so", in: observed{RuntimeErr: garbage}, wantReason: ReasonRuntimeUnavailable, wantState: E,
			wantStatus: status.InProgressStatus, wantMsg: "does not parse as a kubeconfig", backoff: true},
		{name: "a refused kubeconfig is Stalled until the Secret changes", in: observed{Modules: modulesIn(R), RuntimeErr: refused},
			wantReason: ReasonKubeconfigRefused, wantState: E, wantStatus: status.FailedStatus, wantMsg: "users[0].user.exec", terminal: true, movesGen: true},
		{name: "Stalled, but a failed Manifest write is still retried", in: observed{RuntimeErr: refused, WriteErr: writeFailed},
			wantReason: ReasonKubeconfigRefused, wantState: E, wantStatus: status.FailedStatus, wantAfter: time.Minute, movesGen: true},
		{name: "a failed Manifest write backs off", in: observed{Modules: modulesIn(R, E), WriteErr: writeFailed},
			wantReason: ReasonModulesFailed, wantState: E, wantStatus: status.InProgressStatus, wantMsg: "(server error)", backoff: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "kcp-system", Generation: 3}}
			kyma.Status.ObservedGeneration = 3
			o := outcomeOf(kyma, tt.in, testIntervals)
			g.Expect(o.Reason).To(Equal(tt.wantReason))
			g.Expect(o.Message).To(ContainSubstring(tt.wantMsg))

			kyma.Generation = 4 // the spec changed since the last reconcile
			recordOutcome(kyma, o)
			g.Expect(kyma.Status.State).To(Equal(tt.wantState))
			g.Expect(meta.IsStatusConditionTrue(kyma.Status.Conditions, ConditionReady)).To(Equal(tt.wantReady))
			g.Expect(kyma.Status.ObservedGeneration == 4).To(Equal(tt.movesGen), "observedGeneration moves only once the spec was processed")
			if !tt.movesGen {
				kyma.Status.ObservedGeneration = 4 // kstatus reads a stale generation as InProgress; read the conditions
			}
			g.Expect(kstatusOf(g, kyma)).To(Equal(tt.wantStatus))
			for _, c := range kyma.Status.Conditions {
				g.Expect(c.Reason).NotTo(BeEmpty())
				if tt.in.RuntimeErr != nil && !errors.Is(tt.in.RuntimeErr, remote.ErrKubeconfigRefused) {
					g.Expect(c.Message).NotTo(ContainSubstring(tt.in.RuntimeErr.Error()), "no raw error text in a condition")
					g.Expect(c.Message).NotTo(ContainSubstring("40123"), "no raw error text in a condition")
				}
				g.Expect(c.Message).NotTo(ContainSubstring("etcdserver"), "no raw error text in a condition")
			}

			res, err := o.Result()
			g.Expect(err != nil).To(Equal(tt.backoff || tt.terminal), "error returned: %v", err)
			g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(Equal(tt.terminal))
			g.Expect(res.RequeueAfter).To(Equal(tt.wantAfter))
		})
	}
}

// TestRemovedModuleStaysListedUntilItsManifestIsGone drops a module from
// the Kyma: it stays in status.modules as Deleting, with its version and
// the Manifest's word on what blocks, while its Manifest exists, and leaves
// once the Manifest is gone. Deleting the whole Kyma lists every module
// that still has a Manifest.
func TestRemovedModuleStaysListedUntilItsManifestIsGone(t *testing.T) {
	g := NewWithT(t)
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "kcp-system", Generation: 2}}
	kyma.Status.Modules = []v1beta2.ModuleStatus{
		{Name: "kept", State: v1beta2.StateReady, Version: "1.0.0"},
		{Name: "dropped", State: v1beta2.StateReady, Version: "1.2.0", Channel: "fast"},
	}
	kept := resolve.Module{Name: "kept", Version: "1.0.0", Spec: v1beta2.Module{Name: "kept", Managed: true}, Template: &v1beta2.ModuleTemplate{}}
	blocked := manifestIn(v1beta2.StateDeleting, 1, "Waiting for 1 custom resources to be deleted by their owners: Sample kyma-system/users-own")
	blocked.Name, blocked.Spec.ModuleName = ManifestName("k", "dropped"), "dropped"
	blocked.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	stray := manifestIn(v1beta2.StateReady, 1, "Module is ready")
	stray.Name, stray.Spec.ModuleName = ManifestName("k", "stray"), "stray" // not in the status before, not yet marked deleted
	manifests := map[string]*v1beta2.Manifest{
		ManifestName("k", "kept"): manifestIn(v1beta2.StateReady, 1, ""), blocked.Name: blocked, stray.Name: stray,
	}

	setModuleStatuses(kyma, []resolve.Module{kept}, manifests, newReadyClock(), time.Now())
	g.Expect(kyma.Status.Modules).To(HaveLen(3))
	g.Expect(kyma.Status.Modules[0]).To(And(HaveField("Name", "kept"), HaveField("State", v1beta2.StateReady)))
	g.Expect(kyma.Status.Modules[1]).To(And(HaveField("Name", "dropped"), HaveField("State", v1beta2.StateDeleting),
		HaveField("Version", "1.2.0"), HaveField("Channel", "fast"), HaveField("Message", ContainSubstring("Sample kyma-system/users-own"))))
	g.Expect(kyma.Status.Modules[2]).To(And(HaveField("Name", "stray"), HaveField("State", v1beta2.StateDeleting),
		HaveField("Message", "Removing the module from the runtime"), HaveField("Manifest.Name", stray.Name)),
		"a Manifest not yet marked deleted does not pass on its stale Ready message")
	o := outcomeOf(kyma, observed{Modules: kyma.Status.Modules}, testIntervals)
	g.Expect(o.Kind).To(Equal(reconciler.KindProgressing), "a stuck uninstall is not Ready")

	delete(manifests, blocked.Name)
	delete(manifests, stray.Name)
	setModuleStatuses(kyma, []resolve.Module{kept}, manifests, newReadyClock(), time.Now())
	g.Expect(kyma.Status.Modules).To(ConsistOf(HaveField("Name", "kept")))
	g.Expect(outcomeOf(kyma, observed{Modules: kyma.Status.Modules}, testIntervals).Kind).To(Equal(reconciler.KindReady))

	// The whole Kyma being deleted: what has a Manifest is listed, the rest
	// goes.
	kyma.Status.Modules = append(kyma.Status.Modules, v1beta2.ModuleStatus{Name: "never-installed", State: v1beta2.StateError})
	g.Expect(removalStatuses(kyma, manifests, nil)).To(ConsistOf(And(HaveField("Name", "kept"), HaveField("State", v1beta2.StateDeleting))))
}

func kstatusOf(g Gomega, kyma *v1beta2.Kyma) status.Status {
	kyma.APIVersion, kyma.Kind = v1beta2.GroupVersion.String(), "Kyma"
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kyma)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}
