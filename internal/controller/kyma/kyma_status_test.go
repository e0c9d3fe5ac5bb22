package kyma

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

func manifestIn(state v1beta2.State, generation int64, message string) *v1beta2.Manifest {
	m := &v1beta2.Manifest{
		ObjectMeta: metav1.ObjectMeta{Name: "k-m", Namespace: "kcp-system", Generation: generation},
		Spec:       v1beta2.ManifestSpec{Version: "1.0.0"},
		Status:     v1beta2.ManifestStatus{State: state, ObservedGeneration: 1},
	}
	if message != "" {
		m.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "X", Message: message}}
	}
	return m
}

func TestSetStatus(t *testing.T) {
	managed := v1beta2.Module{Name: "m", Managed: true}
	template := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: "m-1.0.0"}}
	resolved := resolve.Module{Name: "m", Channel: "regular", Version: "1.0.0", Template: template, Spec: managed}

	tests := []struct {
		name       string
		module     resolve.Module
		manifest   *v1beta2.Manifest
		runtimeErr error
		wantModule v1beta2.State
		wantKyma   v1beta2.State
		wantReason string
		wantMsg    string
	}{
		{name: "no Manifest yet", module: resolved, wantModule: v1beta2.StateProcessing, wantKyma: v1beta2.StateProcessing, wantReason: ReasonModulesNotReady},
		{name: "Manifest Ready", module: resolved, manifest: manifestIn(v1beta2.StateReady, 1, ""), wantModule: v1beta2.StateReady, wantKyma: v1beta2.StateReady, wantReason: ReasonReady},
		{name: "Ready of an older generation is not Ready", module: resolved, manifest: manifestIn(v1beta2.StateReady, 2, ""),
			wantModule: v1beta2.StateProcessing, wantKyma: v1beta2.StateProcessing, wantReason: ReasonModulesNotReady, wantMsg: "Installing version 1.0.0"},
		{name: "Ready of the old version is not Ready", module: resolve.Module{Name: "m", Channel: "regular", Version: "2.0.0", Template: template, Spec: managed},
			manifest: manifestIn(v1beta2.StateReady, 1, ""), wantModule: v1beta2.StateProcessing, wantKyma: v1beta2.StateProcessing,
			wantReason: ReasonModulesNotReady, wantMsg: "Installing version 2.0.0"},
		{name: "Manifest Error passes its message", module: resolved, manifest: manifestIn(v1beta2.StateError, 1, "fetching rawManifest: boom"),
			wantModule: v1beta2.StateError, wantKyma: v1beta2.StateError, wantReason: ReasonModulesFailed, wantMsg: "fetching rawManifest: boom"},
		{name: "Manifest Warning", module: resolved, manifest: manifestIn(v1beta2.StateWarning, 1, "Sample reports Warning"),
			wantModule: v1beta2.StateWarning, wantKyma: v1beta2.StateWarning, wantReason: ReasonModulesNotReady},
		{name: "unresolvable module", module: resolve.Module{Name: "m", Spec: managed, Err: errors.New("no ModuleReleaseMeta")},
			wantModule: v1beta2.StateError, wantKyma: v1beta2.StateError, wantReason: ReasonModulesFailed, wantMsg: "no ModuleReleaseMeta"},
		{name: "unmanaged module", module: resolve.Module{Name: "m", Spec: v1beta2.Module{Name: "m"}},
			wantModule: v1beta2.StateUnmanaged, wantKyma: v1beta2.StateReady, wantReason: ReasonReady},
		{name: "runtime unavailable wins", module: resolved, manifest: manifestIn(v1beta2.StateReady, 1, ""), runtimeErr: errors.New("dial tcp: connection refused"),
			wantModule: v1beta2.StateReady, wantKyma: v1beta2.StateError, wantReason: ReasonRuntimeUnavailable},
		{name: "refused kubeconfig has its own reason", module: resolved, manifest: manifestIn(v1beta2.StateReady, 1, ""),
			runtimeErr: fmt.Errorf("%w: Secret kcp-system/k key \"config\" is refused: %w", remote.ErrInvalidKubeconfig,
				&kubeconfig.FieldError{Field: "users[0].user.exec", Problem: "exec plugins are refused"}),
			wantModule: v1beta2.StateReady, wantKyma: v1beta2.StateError, wantReason: ReasonKubeconfigRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k", Generation: 3}}
			manifests := map[string]*v1beta2.Manifest{}
			if tt.manifest != nil {
				manifests[ManifestName(kyma.Name, "m")] = tt.manifest
			}
			setStatus(kyma, []resolve.Module{tt.module}, manifests, tt.runtimeErr, newReadyClock())

			g.Expect(kyma.Status.Modules).To(HaveLen(1))
			g.Expect(kyma.Status.Modules[0].State).To(Equal(tt.wantModule))
			g.Expect(kyma.Status.Modules[0].Message).To(ContainSubstring(tt.wantMsg))
			g.Expect(kyma.Status.State).To(Equal(tt.wantKyma))
			cond := meta.FindStatusCondition(kyma.Status.Conditions, ConditionReady)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(tt.wantReason))
			g.Expect(cond.Reason).NotTo(Equal("m"), "a module name is never a reason")
			g.Expect(cond.Status == metav1.ConditionTrue).To(Equal(tt.wantKyma == v1beta2.StateReady))
		})
	}
}

// TestSetStatusKeepsLastTransitionWhenNothingChanged computes the status of
// a Ready Kyma twice, the second time later, with nothing changed: the
// status is the same, timestamps included, so nothing is written.
func TestSetStatusKeepsLastTransitionWhenNothingChanged(t *testing.T) {
	g := NewWithT(t)
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k"}}
	// The module resolves to the version the Manifest has installed, so that
	// the steady state is Ready (a module without a version would be
	// Processing, "Installing version").
	resolved := resolve.Module{Name: "m", Version: "1.0.0", Spec: v1beta2.Module{Name: "m", Managed: true}, Template: &v1beta2.ModuleTemplate{}}
	manifests := map[string]*v1beta2.Manifest{ManifestName(kyma.Name, "m"): manifestIn(v1beta2.StateReady, 1, "")}
	setStatus(kyma, []resolve.Module{resolved}, manifests, nil, newReadyClock())
	g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), "the case is the Ready steady state")
	g.Expect(kyma.Status.Modules).To(ConsistOf(HaveField("State", v1beta2.StateReady)))

	// The status as the previous reconcile stored it, an hour ago: a
	// timestamp set again now would differ from it.
	anHourAgo := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	kyma.Status.LastUpdateTime = anHourAgo
	for i := range kyma.Status.Conditions {
		kyma.Status.Conditions[i].LastTransitionTime = anHourAgo
	}
	first := kyma.Status.DeepCopy()
	setStatus(kyma, []resolve.Module{resolved}, manifests, nil, newReadyClock())
	g.Expect(kyma.Status).To(Equal(*first), "a steady state writes the same status: no flapping, no write")
}

func TestUnionModules(t *testing.T) {
	g := NewWithT(t)
	kcp := []v1beta2.Module{{Name: "b", Channel: "fast"}, {Name: "a"}}
	runtime := []v1beta2.Module{{Name: "z"}, {Name: "b", Channel: "regular"}, {Name: "c"}}
	got := unionModules(kcp, runtime)
	g.Expect(got).To(Equal([]v1beta2.Module{{Name: "b", Channel: "fast"}, {Name: "a"}, {Name: "c"}, {Name: "z"}}),
		"the control plane's entries first and winning, then the runtime's others sorted")
}

func TestManifestNameIsStableAndShort(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ManifestName("kyma", "sample")).To(Equal("kyma-sample"))
	long := "a-very-long-kyma-name-that-goes-on-and-on-and-on"
	name := ManifestName(long, "a-long-module-name")
	g.Expect(len(name)).To(BeNumerically("<=", 63))
	g.Expect(ManifestName(long, "a-long-module-name")).To(Equal(name))
	g.Expect(ManifestName(long, "a-long-module-namf")).NotTo(Equal(name))
}
