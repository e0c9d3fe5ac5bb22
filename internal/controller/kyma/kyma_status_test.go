package kyma

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
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

// TestModuleStatus checks each module's entry in status.modules; how the
// Kyma as a whole reads from them is TestOutcomeOf's.
func TestModuleStatus(t *testing.T) {
	managed := v1beta2.Module{Name: "m", Managed: true}
	template := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: "m-1.0.0"}}
	resolved := resolve.Module{Name: "m", Channel: "regular", Version: "1.0.0", Template: template, Spec: managed, OCMComponentName: "kyma-project.io/module/m"}
	deleting := manifestIn(v1beta2.StateDeleting, 1, "Waiting for 1 custom resources to be deleted by their owners: Sample kyma-system/users-own")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	tests := []struct {
		name       string
		module     resolve.Module
		manifest   *v1beta2.Manifest
		wantModule v1beta2.State
		wantMsg    string
	}{
		{name: "no Manifest yet", module: resolved, wantModule: v1beta2.StateProcessing},
		{name: "Manifest Ready", module: resolved, manifest: manifestIn(v1beta2.StateReady, 1, ""), wantModule: v1beta2.StateReady},
		{name: "Ready of an older generation is not Ready", module: resolved, manifest: manifestIn(v1beta2.StateReady, 2, ""),
			wantModule: v1beta2.StateProcessing, wantMsg: "Installing version 1.0.0"},
		{name: "Ready of the old version is not Ready", module: resolve.Module{Name: "m", Channel: "regular", Version: "2.0.0", Template: template, Spec: managed},
			manifest: manifestIn(v1beta2.StateReady, 1, ""), wantModule: v1beta2.StateProcessing, wantMsg: "Installing version 2.0.0"},
		{name: "Manifest Error passes its message", module: resolved, manifest: manifestIn(v1beta2.StateError, 1, "fetching rawManifest: boom"),
			wantModule: v1beta2.StateError, wantMsg: "fetching rawManifest: boom"},
		{name: "Manifest Warning", module: resolved, manifest: manifestIn(v1beta2.StateWarning, 1, "Sample reports Warning"),
			wantModule: v1beta2.StateWarning, wantMsg: "Sample reports Warning"},
		{name: "unresolvable module", module: resolve.Module{Name: "m", Spec: managed, Err: errors.New("no ModuleReleaseMeta")},
			wantModule: v1beta2.StateError, wantMsg: "no ModuleReleaseMeta"},
		{name: "unmanaged module", module: resolve.Module{Name: "m", Spec: v1beta2.Module{Name: "m"}}, wantModule: v1beta2.StateUnmanaged},
		{name: "Manifest being deleted names what blocks", module: resolved, manifest: deleting,
			wantModule: v1beta2.StateDeleting, wantMsg: "Sample kyma-system/users-own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k", Generation: 3}}
			manifests := map[string]*v1beta2.Manifest{}
			if tt.manifest != nil {
				manifests[ManifestName(kyma.Name, "m")] = tt.manifest
			}
			setModuleStatuses(kyma, []resolve.Module{tt.module}, manifests, newReadyClock(), time.Now())

			g.Expect(kyma.Status.Modules).To(HaveLen(1))
			g.Expect(kyma.Status.Modules[0].State).To(Equal(tt.wantModule))
			g.Expect(kyma.Status.Modules[0].Message).To(ContainSubstring(tt.wantMsg))
			g.Expect(kyma.Status.Modules[0].OCMComponentName).To(Equal(tt.module.OCMComponentName))
			g.Expect(kyma.Status.ActiveChannel).To(Equal(v1beta2.DefaultChannel))
		})
	}
}

// TestModuleMessagesAreBounded: a module's message quotes an error or the
// Manifest's message, which quotes the module's own status; however long
// they are, the entry holds at most v1beta2.MaxMessageLength characters,
// ending with a marker, for a module still wanted and one being removed.
func TestModuleMessagesAreBounded(t *testing.T) {
	long := "resolving the module: " + strings.Repeat("ошибка ", 5000)
	managed := v1beta2.Module{Name: "m", Managed: true}
	removing := manifestIn(v1beta2.StateDeleting, 1, long)
	removing.Name = ManifestName("k", "gone")
	removing.Spec.ModuleName = "gone"
	removing.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	tests := []struct {
		name      string
		modules   []resolve.Module
		manifests []*v1beta2.Manifest
	}{
		{name: "a long error", modules: []resolve.Module{{Name: "m", Spec: managed, Err: errors.New(long)}}},
		{name: "a long Manifest message", modules: []resolve.Module{{Name: "m", Version: "1.0.0", Spec: managed}},
			manifests: []*v1beta2.Manifest{manifestIn(v1beta2.StateError, 1, long)}},
		{name: "a long message of a module being removed", manifests: []*v1beta2.Manifest{removing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k", Generation: 1}}
			manifests := map[string]*v1beta2.Manifest{}
			for _, m := range tt.manifests {
				if m.Name == "k-m" {
					m.Name = ManifestName("k", "m")
				}
				manifests[m.Name] = m
			}
			setModuleStatuses(kyma, tt.modules, manifests, newReadyClock(), time.Now())
			g.Expect(kyma.Status.Modules).To(HaveLen(1))
			message := kyma.Status.Modules[0].Message
			g.Expect(utf8.RuneCountInString(message)).To(Equal(v1beta2.MaxMessageLength))
			g.Expect(utf8.ValidString(message)).To(BeTrue())
			g.Expect(message).To(HavePrefix("resolving the module: ошибка"))
			g.Expect(message).To(HaveSuffix(" … (truncated)"))
		})
	}
}

// TestSteadyStatusIsNotRewritten computes and records the same Ready
// status twice, an hour apart: nothing changes, so nothing is written (the
// first status is moved an hour back, so that a time taken anew would show).
func TestSteadyStatusIsNotRewritten(t *testing.T) {
	g := NewWithT(t)
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k", Generation: 2}}
	resolved := resolve.Module{Name: "m", Spec: v1beta2.Module{Name: "m", Managed: true}, Template: &v1beta2.ModuleTemplate{}, Version: "1.0.0"}
	manifests := map[string]*v1beta2.Manifest{ManifestName(kyma.Name, "m"): manifestIn(v1beta2.StateReady, 1, "")}
	steady := func() {
		setModuleStatuses(kyma, []resolve.Module{resolved}, manifests, newReadyClock(), time.Now())
		recordOutcome(kyma, outcomeOf(kyma, observed{Modules: kyma.Status.Modules}, requeue.Intervals{}))
	}
	steady()
	g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady))
	hourAgo := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	kyma.Status.LastUpdateTime = hourAgo
	for i := range kyma.Status.Conditions {
		kyma.Status.Conditions[i].LastTransitionTime = hourAgo
	}
	first := kyma.Status.DeepCopy()
	steady()
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
