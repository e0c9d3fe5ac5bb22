package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

// Manual upgrades (docs/modules.md, "Upgrades on the runtime owner's
// terms"): the runtime owner says upgrade: Manual in the runtime's Kyma (or
// the SREs' policy says it for a label group); a new version then waits
// for the owner's approval until a deadline, and the status says which
// version and until when.

// waitMessage is what a module says while version waits for the owner.
func waitMessage(version, installed string, forceAt time.Time) string {
	return "Version " + version + " waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until " +
		forceAt.UTC().Format(time.RFC3339) + ", when it is installed without it; " + installed + " stays installed"
}

// startOnATuesday moves the operator's clock forward to the next Tuesday
// noon: far from the Saturday maintenance window, whatever earlier tests
// did with the clock. It returns the time, to the second, as offers record
// it.
func startOnATuesday() time.Time {
	now := clock.Now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day()+1, 12, 0, 0, 0, time.UTC)
	for day.Weekday() != time.Tuesday {
		day = day.AddDate(0, 0, 1)
	}
	clock.SetTime(day)
	return day
}

// statusOf is the Kyma's status entry for the module.
func statusOf(g Gomega, c client.Client, key client.ObjectKey, module string) v1beta2.ModuleStatus {
	k := &v1beta2.Kyma{}
	g.Expect(c.Get(context.Background(), key, k)).To(Succeed())
	for _, m := range k.Status.Modules {
		if m.Name == module {
			return m
		}
	}
	g.Expect(k.Status.Modules).To(ContainElement(HaveField("Name", module)))
	return v1beta2.ModuleStatus{}
}

func kcpKey(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: kcpNamespace, Name: name}
}

// runtimeKey is the runtime's own Kyma of a Kyma of newFleet (its sync
// namespace is its name).
func runtimeKey(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: name, Name: v1beta2.DefaultRuntimeKymaName}
}

// ownerPatch merge-patches the runtime's own Kyma, as its owner would.
func ownerPatch(name, patch string) error {
	var err error
	Eventually(func(g Gomega) {
		k := &v1beta2.Kyma{}
		g.Expect(env.rtClient.Get(context.Background(), runtimeKey(name), k)).To(Succeed())
		err = env.rtClient.Patch(context.Background(), k, client.RawPatch("application/merge-patch+json", []byte(patch)))
		g.Expect(apierrors.IsConflict(err)).To(BeFalse(), "a write of the operator's came between")
	}, timeout, interval).Should(Succeed())
	return err
}

// The owner sets a module to upgrade manually in the runtime's Kyma: a new
// version waits, says which version and until when (in both Kymas), and
// keeps its deadline over later reconciles; an approval of another version
// does not count, and says so; the approval of the version installs it.
func TestManualUpgradeWaitsForTheOwnersApproval(t *testing.T) {
	RegisterTestingT(t)
	const module = "ledger"
	publishModule(t, module, configMap(module, "2.0.0"))
	name := newFleet(t, "ledger", "", 1)[0]

	// A mode the API does not know is refused where the owner types it.
	Expect(ownerPatch(name, `{"spec":{"modules":[{"name":"ledger","upgrade":"manual"}]}}`)).To(MatchError(ContainSubstring(`Unsupported value: "manual"`)))
	Expect(ownerPatch(name, `{"spec":{"modules":[{"name":"ledger","upgrade":"Manual"}]}}`)).To(Succeed())
	eventuallyAt([]string{name}, module, "1.0.0")
	Expect(statusOf(Default, env.kcpClient, kcpKey(name), module).ManualUpgrade).To(BeNil(), "a fresh install does not wait")

	offeredAt := startOnATuesday()
	forceAt := offeredAt.Add(upgradepolicy.DefaultForceAfter)
	moveChannel(t, module)
	want := waitMessage("2.0.0", "1.0.0", forceAt)
	Eventually(func(g Gomega) {
		m := statusOf(g, env.kcpClient, kcpKey(name), module)
		g.Expect(m.State).To(Equal(v1beta2.StateReady))
		g.Expect(m.Version).To(Equal("1.0.0"))
		g.Expect(m.Message).To(Equal(want))
		g.Expect(m.ManualUpgrade).NotTo(BeNil())
		g.Expect(*m.ManualUpgrade).To(And(HaveField("Version", "2.0.0"), HaveField("Approved", false), HaveField("Forced", false)))
		g.Expect(m.ManualUpgrade.OfferedAt.Time).To(BeTemporally("==", offeredAt))
		g.Expect(m.ManualUpgrade.ForceAt.Time).To(BeTemporally("==", forceAt))
		// The owner reads it where they work.
		g.Expect(statusOf(g, env.rtClient, runtimeKey(name), module).Message).To(Equal(want))
	}, timeout, interval).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(manifestOf(g, name, module).Spec.Version).To(Equal("1.0.0"))
	}, 2*time.Second, interval).Should(Succeed())

	// The owner cannot move the deadline by editing the runtime Kyma's
	// status: it mirrors the control plane's, which alone is read.
	rk := &v1beta2.Kyma{}
	Expect(env.rtClient.Get(context.Background(), runtimeKey(name), rk)).To(Succeed())
	forged := rk.DeepCopy()
	for i := range forged.Status.Modules {
		if forged.Status.Modules[i].ManualUpgrade != nil {
			forged.Status.Modules[i].ManualUpgrade.ForceAt.Time = forceAt.Add(365 * 24 * time.Hour)
			forged.Status.Modules[i].ManualUpgrade.Approved = true
		}
	}
	Expect(env.rtClient.Status().Patch(context.Background(), forged, client.MergeFrom(rk))).To(Succeed())
	Eventually(func(g Gomega) {
		touch(name)
		mirrored := statusOf(g, env.rtClient, runtimeKey(name), module)
		g.Expect(mirrored.ManualUpgrade).NotTo(BeNil())
		g.Expect(mirrored.ManualUpgrade.ForceAt.Time).To(BeTemporally("==", forceAt), "the mirror is written back")
		g.Expect(mirrored.ManualUpgrade.Approved).To(BeFalse())
		g.Expect(statusOf(g, env.kcpClient, kcpKey(name), module).Message).To(Equal(want))
	}, timeout, interval).Should(Succeed())
	Expect(manifestOf(Default, name, module).Spec.Version).To(Equal("1.0.0"))

	// A day later, and an approval of a version that is not offered: the
	// deadline is still the first offer's.
	clock.SetTime(offeredAt.Add(24 * time.Hour))
	Expect(ownerPatch(name, `{"spec":{"approvedUpgrades":[{"module":"ledger","version":"1.5.0"}]}}`)).To(Succeed())
	Eventually(func(g Gomega) {
		touch(name)
		m := statusOf(g, env.kcpClient, kcpKey(name), module)
		g.Expect(m.Message).To(Equal(want + ". The approval of 1.5.0 does not count for 2.0.0"))
		g.Expect(m.ManualUpgrade.ForceAt.Time).To(BeTemporally("==", forceAt))
		g.Expect(m.ManualUpgrade.OfferedAt.Time).To(BeTemporally("==", offeredAt))
	}, timeout, interval).Should(Succeed())
	Expect(manifestOf(Default, name, module).Spec.Version).To(Equal("1.0.0"))

	Expect(ownerPatch(name, `{"spec":{"approvedUpgrades":[{"module":"ledger","version":"2.0.0"}]}}`)).To(Succeed())
	eventuallyAt([]string{name}, module, "2.0.0")
	Eventually(func(g Gomega) {
		m := statusOf(g, env.kcpClient, kcpKey(name), module)
		g.Expect(m.ManualUpgrade).To(BeNil(), "the version reached, the offer is done")
		g.Expect(m.Message).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
}

// A label group's policy makes a Kyma's modules manual with a week's
// notice. Past the deadline the version is forced: the Kyma gets one
// ManualUpgradeForced event, and the other holds still apply: this
// version requires downtime, so it waits for the maintenance window, and
// the status says both.
func TestManualUpgradeIsForcedAtItsDeadline(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const module = "tally"
	publish(t, module, "1.0.0", configMap(module, "1.0.0"))
	publish(t, module, "2.0.0", configMap(module, "2.0.0"), func(t *v1beta2.ModuleTemplate) { t.Spec.RequiresDowntime = true })
	offer(t, module)
	name := newFleet(t, "tally", module, 1)[0]
	k := &v1beta2.Kyma{}
	Expect(env.kcpClient.Get(ctx, kcpKey(name), k)).To(Succeed())
	Expect(env.kcpClient.Patch(ctx, k, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"upgrades":"manual"}}}`)))).To(Succeed())
	eventuallyAt([]string{name}, module, "1.0.0")

	offeredAt := startOnATuesday()
	forceAt := offeredAt.Add(168 * time.Hour) // the policy owners-first
	moveChannel(t, module)
	Eventually(func(g Gomega) {
		touch(name)
		m := statusOf(g, env.kcpClient, kcpKey(name), module)
		g.Expect(m.Message).To(Equal(waitMessage("2.0.0", "1.0.0", forceAt)))
		g.Expect(m.Maintenance).To(BeFalse(), "the owner goes first")
		g.Expect(m.ManualUpgrade).NotTo(BeNil())
		g.Expect(m.ManualUpgrade.ForceAt.Time).To(BeTemporally("==", forceAt))
	}, timeout, interval).Should(Succeed())

	// One second before the deadline it still waits; at it, it is forced.
	clock.SetTime(forceAt.Add(-time.Second))
	touch(name)
	Consistently(func(g Gomega) {
		mu := statusOf(g, env.kcpClient, kcpKey(name), module).ManualUpgrade
		g.Expect(mu).NotTo(BeNil())
		g.Expect(mu.Forced).To(BeFalse())
	}, 2*time.Second, interval).Should(Succeed())
	clock.SetTime(forceAt)
	slot, ok := windows.SlotFor(name, nil, forceAt)
	Expect(ok).To(BeTrue())
	Eventually(func(g Gomega) {
		touch(name)
		m := statusOf(g, env.kcpClient, kcpKey(name), module)
		g.Expect(m.ManualUpgrade).NotTo(BeNil())
		g.Expect(m.ManualUpgrade.Forced).To(BeTrue())
		g.Expect(m.ManualUpgrade.Approved).To(BeFalse())
		g.Expect(m.Version).To(Equal("1.0.0"))
		g.Expect(m.Maintenance).To(BeTrue())
		g.Expect(m.Message).To(Equal("Version 2.0.0 requires downtime: it is installed in maintenance window saturday-night, at " +
			slot.At.UTC().Format(time.RFC3339) + "; 1.0.0 stays installed until then"))
	}, timeout, interval).Should(Succeed())
	uid := k.UID
	forcedEvents := func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(env.kcpClient.List(ctx, list, client.InNamespace(kcpNamespace))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.UID == uid && e.Reason == kyma.ReasonManualUpgradeForced {
				g.Expect(e.Type).To(Equal(corev1.EventTypeNormal))
				g.Expect(e.Series).To(BeNil(), "reported once")
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
	Eventually(forcedEvents, timeout, interval).Should(Equal([]string{"Module tally: version 2.0.0 replaces 1.0.0 without the runtime owner's approval, as soon as rollouts and maintenance windows let it: its deadline " +
		forceAt.UTC().Format(time.RFC3339) + " passed"}))

	clock.SetTime(slot.At.Add(time.Minute))
	touch(name)
	eventuallyAt([]string{name}, module, "2.0.0")
	Eventually(func(g Gomega) {
		g.Expect(statusOf(g, env.kcpClient, kcpKey(name), module).ManualUpgrade).To(BeNil())
	}, timeout, interval).Should(Succeed())
	Expect(forcedEvents(Default)).To(HaveLen(1), "one event, not one per reconcile")
}

// A ModuleRollout counts a runtime whose owner has not approved the new
// version as pending, with that reason, and moves the others; an SRE's
// approval in the control plane's Kyma lets it move with the next wave.
// The owner chose Manual in the runtime's Kyma for a module the control
// plane lists: the control plane's entry sets no mode, so the owner's
// counts.
func TestManualUpgradeIsPendingInTheRollout(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const module = "quota"
	publishModule(t, module, configMap(module, "2.0.0"))
	names := newFleet(t, "quota", module, 2)
	eventuallyAt(names, module, "1.0.0")
	ro := newRollout(t, module)
	patch := client.MergeFrom(ro.DeepCopy())
	ro.Spec.Canary = nil
	Expect(env.kcpClient.Patch(ctx, ro, patch)).To(Succeed())
	manual := names[1]
	Expect(ownerPatch(manual, `{"spec":{"modules":[{"name":"quota","upgrade":"Manual"}]}}`)).To(Succeed())
	Eventually(func(g Gomega) {
		k := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(ctx, kcpKey(manual), k)).To(Succeed())
		g.Expect(k.Status.RuntimeModules).To(ContainElement(HaveField("Upgrade", v1beta2.UpgradeManual)))
	}, timeout, interval).Should(Succeed())

	offeredAt := startOnATuesday()
	forceAt := offeredAt.Add(upgradepolicy.DefaultForceAfter)
	moveChannel(t, module)
	eventuallyAt(names[:1], module, "2.0.0")
	reason := "waiting for the runtime owner's approval of 2.0.0 until " + forceAt.UTC().Format(time.RFC3339)
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Done).To(Equal(int32(1)))
		g.Expect(ro.Status.Runtimes.Pending).To(ConsistOf(v1beta2.RolloutRuntime{Kyma: manual, Reason: reason}))
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutProgressing))
		g.Expect(ro.Status.FailedCount).To(BeZero())
		g.Expect(ro.Status.InFlight).To(BeEmpty())
		g.Expect(conditionMessage(ro, "Reconciling")).To(ContainSubstring("waiting for runtimes that cannot move now, such as " + manual + " (" + reason + ")"))
		m := statusOf(g, env.kcpClient, kcpKey(manual), module)
		g.Expect(m.Message).To(Equal(waitMessage("2.0.0", "1.0.0", forceAt)))
	}, timeout, interval).Should(Succeed())
	Expect(manifestOf(Default, manual, module).Spec.Version).To(Equal("1.0.0"))

	// An SRE approves for the owner.
	k := &v1beta2.Kyma{}
	Expect(env.kcpClient.Get(ctx, kcpKey(manual), k)).To(Succeed())
	Expect(env.kcpClient.Patch(ctx, k, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"approvedUpgrades":[{"module":"quota","version":"2.0.0"}]}}`)))).To(Succeed())
	eventuallyAt(names, module, "2.0.0")
	settled(ro, "2.0.0")
	Expect(strings.Join(ro.Status.Runtimes.Done, ",")).To(ContainSubstring(manual))
}
