package lmctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	lmctlrollout "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/rollout"
)

// TestRolloutStatusAndRollback reads a rollout's status as the planner
// writes it, from a real control plane in a namespace of its own (-n), the
// way an SRE paged by a rollout alert does: lmctl rollout status shows
// every runtime named by state with its reason and how many more there
// are, the halt, the resume, a refused rollback, the pinned digests and
// the planner's liveness; lmctl rollout rollback sets spec.rollback to who
// asked and why. No operator runs: lmctl shows what the status says.
func TestRolloutStatusAndRollback(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "fleet-a"
	cp, kcp := controlPlaneWith(t, ns)
	status := func(args ...string) (string, string, int) {
		return lmctl(t, time.Minute, append([]string{"rollout", "status", "shop-regular", "-n", ns, "--kubeconfig", cp.KubeconfigPath()}, args...)...)
	}

	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-regular", Namespace: ns},
		Spec: v1beta2.ModuleRolloutSpec{ModuleName: "shop", Channel: "regular", MaxInFlight: intstr.FromInt32(2),
			SoakTime: metav1.Duration{Duration: 10 * time.Minute}},
	}
	g.Expect(kcp.Create(ctx, ro)).To(Succeed())
	// The planner has not looked at it yet.
	stdout, stderr, code := status()
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(ContainSubstring("Planner:   not looked at yet\n"))

	// Halted in wave 2: more runtimes than the status names, each state's
	// names with their reasons, a resume before, a rollback refused.
	now := time.Now()
	minutesAgo := func(n int) *metav1.Time { return &metav1.Time{Time: now.Add(-time.Duration(n) * time.Minute)} }
	var done []string
	for i := range 20 {
		done = append(done, fmt.Sprintf("kyma-%02d", i))
	}
	ro.Status = v1beta2.ModuleRolloutStatus{
		Phase: v1beta2.RolloutHalted, FromVersion: "1.0.0", ToVersion: "2.0.0", Template: ns + "/shop-2.0.0@42", Wave: 2,
		InFlight: []string{"kyma-40"}, Failed: []string{"kyma-41", "kyma-42"},
		Total: 60, Done: 25, FailedCount: 3, Pending: 31,
		HaltReason: "3 of 60 runtimes failed at 2.0.0, more than maxFailures allows (2): kyma-41, kyma-42, kyma-43",
		ResumedBy:  "alice: canary fixed by hand", ResumedAt: minutesAgo(90),
		Runtimes: v1beta2.RolloutRuntimes{
			Done: done,
			Failed: []v1beta2.RolloutRuntime{
				{Kyma: "kyma-41", Reason: "Error at 2.0.0: CRD shops.example.com is not established"},
				{Kyma: "kyma-42", Reason: "not Ready within progressDeadline (10m0s)"},
			},
			Pending: []v1beta2.RolloutRuntime{{Kyma: "kyma-50", Reason: "outside its maintenance window"}, {Kyma: "kyma-51", Reason: "hibernated"}},
		},
		Content: []v1beta2.ContentResource{{Name: v1beta2.RawManifestResourceName, Link: "oci://registry.example.com/modules/shop@sha256:" + strings.Repeat("ab", 32)}},
		Rollback: &v1beta2.RolloutRollback{By: "bob: 2.0.0 loses orders", At: *minutesAgo(5), Of: "2.0.0",
			Refused: "the ModuleTemplate of 2.0.0 does not list 1.0.0 in spec.rollbackTo: ask the module team"},
		PlannedAt: minutesAgo(7), StartedAt: minutesAgo(240), WaveStartedAt: minutesAgo(30),
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Halted", Message: "Halted: 3 of 60 runtimes failed at 2.0.0",
			LastTransitionTime: *minutesAgo(20)}},
	}
	g.Expect(kcp.Status().Update(ctx, ro)).To(Succeed())

	stdout, stderr, code = status()
	g.Expect(code).To(BeZero(), stderr)
	for _, want := range []string{
		"Rollout shop-regular: module shop, channel regular, 1.0.0 → 2.0.0\n",
		"Phase:     Halted, wave 2\n",
		"25/60 done, 1 in flight, 31 pending, 3 failed\n",
		"In flight: kyma-40\n",
		"Failed:    kyma-41: Error at 2.0.0: CRD shops.example.com is not established\n" +
			"           kyma-42: not Ready within progressDeadline (10m0s)\n" +
			"           … and 1 more\n",
		"Pending:   kyma-50: outside its maintenance window\n           kyma-51: hibernated\n           … and 29 more\n",
		"Done:      kyma-00, kyma-01, ",
		"kyma-19, … and 5 more\n",
		"Halted:    3 of 60 runtimes failed at 2.0.0, more than maxFailures allows (2): kyma-41, kyma-42, kyma-43\n",
		"Resumed:   alice: canary fixed by hand, 1h30m",
		"Rollback:  bob: 2.0.0 loses orders, 5m",
		"of 2.0.0; REFUSED: the ModuleTemplate of 2.0.0 does not list 1.0.0 in spec.rollbackTo: ask the module team\n",
		"Template:  fleet-a/shop-2.0.0@42\n",
		"Content:   rawManifest oci://registry.example.com/modules/shop@sha256:abab",
		"Planner:   looked 7m", // halted: nothing would move anyway
		"Status:    Ready=False Halted: Halted: 3 of 60 runtimes failed at 2.0.0\n",
	} {
		g.Expect(stdout).To(ContainSubstring(want))
	}
	g.Expect(stdout).NotTo(ContainSubstring("no planner"))

	// The same for a script.
	stdout, stderr, code = status("-o", "json")
	g.Expect(code).To(BeZero(), stderr)
	var r lmctlrollout.Rollout
	g.Expect(json.Unmarshal([]byte(stdout), &r)).To(Succeed(), stdout)
	g.Expect(r.Runtimes.Failed).To(HaveLen(2))
	g.Expect(r.Runtimes.Pending).To(ContainElement(lmctlrollout.Runtime{Kyma: "kyma-51", Reason: "hibernated"}))
	g.Expect(r.Rollback).To(HaveField("Refused", ContainSubstring("spec.rollbackTo")))
	g.Expect(r.PlannedAt).NotTo(BeNil())
	g.Expect(r.Content).To(HaveLen(1))

	// Resumed and moving, but the plan is 7 minutes old: no planner runs.
	ro.Status.Phase, ro.Status.HaltReason = v1beta2.RolloutProgressing, ""
	g.Expect(kcp.Status().Update(ctx, ro)).To(Succeed())
	stdout, stderr, code = status()
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(MatchRegexp(`Planner:   no planner has looked for 7m\d+s \(last at \S+\): every runtime holds the module`))

	// A rollback needs a reason; with one, spec.rollback says who, when and why.
	_, stderr, code = lmctl(t, time.Minute, "rollout", "rollback", "shop-regular", "-n", ns, "--kubeconfig", cp.KubeconfigPath())
	g.Expect(code).NotTo(BeZero())
	g.Expect(stderr).To(ContainSubstring("--reason"))
	g.Expect(kcp.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
	g.Expect(ro.Spec.Rollback).To(BeEmpty())

	ro.Spec.Paused = true
	g.Expect(kcp.Update(ctx, ro)).To(Succeed())
	stdout, stderr, code = lmctl(t, time.Minute, "rollout", "rollback", "shop-regular", "--reason", "2.0.0 loses orders", "-n", ns, "--kubeconfig", cp.KubeconfigPath())
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(Equal("ModuleRollout shop-regular: rollback asked for; lmctl rollout status shop-regular shows whether it runs or was refused\n" +
		"It is paused: no wave of the rollback starts until lmctl rollout resume shop-regular\n"))
	g.Expect(kcp.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
	g.Expect(ro.Spec.Rollback).To(MatchRegexp(`^\S+ at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(lmctl rollout rollback\): 2\.0\.0 loses orders$`))
	g.Expect(ro.Spec.Paused).To(BeTrue(), "only spec.rollback changes")
	g.Expect(ro.Spec.MaxInFlight).To(Equal(intstr.FromInt32(2)))

	// A rollout that is not there is named in the error.
	_, stderr, code = lmctl(t, time.Minute, "rollout", "rollback", "nope", "--reason", "x", "-n", ns, "--kubeconfig", cp.KubeconfigPath())
	g.Expect(code).NotTo(BeZero())
	g.Expect(stderr).To(ContainSubstring(`fleet-a/nope`))
}
