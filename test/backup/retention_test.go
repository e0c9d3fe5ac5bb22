package backup

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// After five weeks of daily backups and then thirty hours of hourly ones,
// exactly the grandfather-father-son set is left in the registry: the last
// 24 hours, the last backup of each of the 7 days, and of each of the 4
// weeks (ISO weeks, Monday first).
func TestRetentionLeavesTheGFSSet(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const name = "gfs"
	// Monday 2026-03-02, before the first backup.
	advance(utc("2026-03-02 00:30"))
	register(t, name, env.runtimes[0])
	t.Cleanup(func() { unregister(name) })
	Eventually(func(g Gomega) {
		g.Expect(runtimeBackup(g, name).Status.NextScheduleTime).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())

	// Daily at noon, Monday 2026-03-02 to Sunday 2026-04-05.
	for d := range 35 {
		backupAt(name, utc("2026-03-02 12:00").AddDate(0, 0, d))
	}
	// Hourly, Monday 2026-04-06 00:00 to Tuesday 2026-04-07 05:00.
	for h := range 30 {
		backupAt(name, utc("2026-04-06 00:00").Add(time.Duration(h)*time.Hour))
	}

	var want []string
	for _, w := range []string{"2026-03-22 12:00", "2026-03-29 12:00"} { // weeks of Mar 16 and Mar 23
		want = append(want, backup.Tag(utc(w)))
	}
	for d := 1; d <= 5; d++ { // days Apr 1 to Apr 5
		want = append(want, backup.Tag(utc("2026-03-31 12:00").AddDate(0, 0, d)))
	}
	for h := 6; h < 30; h++ { // the last 24 hours; they hold Apr 6's and Apr 7's last, and this week's
		want = append(want, backup.Tag(utc("2026-04-06 00:00").Add(time.Duration(h)*time.Hour)))
	}
	Expect(want).To(HaveLen(31))

	infos, err := env.store.List(ctx, name)
	Expect(err).NotTo(HaveOccurred())
	var got []string
	for _, i := range infos {
		got = append(got, i.Tag)
	}
	Expect(got).To(Equal(want))
	rb := runtimeBackup(Default, name)
	Expect(rb.Status.Count).To(Equal(int32(31)))
	Expect(rb.Status.Backups).To(HaveLen(31))
	Expect(rb.Status.Backups[0].Tag).To(Equal(want[30]), "newest first")
}

// A deleted runtime's backups are kept for the grace period, then deleted
// from the registry with the RuntimeBackup.
func TestGracePeriod(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const name = "grace"
	register(t, name, env.runtimes[0])
	var next time.Time
	Eventually(func(g Gomega) {
		rb := runtimeBackup(g, name)
		g.Expect(rb.Status.NextScheduleTime).NotTo(BeNil())
		next = rb.Status.NextScheduleTime.Time
	}, timeout, interval).Should(Succeed())
	backupAt(name, next)
	unregister(name)

	var deleteAfter time.Time
	Eventually(func(g Gomega) {
		rb := runtimeBackup(g, name)
		g.Expect(rb.Status.DeleteAfter).NotTo(BeNil())
		deleteAfter = rb.Status.DeleteAfter.Time
	}, timeout, interval).Should(Succeed())
	Expect(deleteAfter.Sub(clock.Now())).To(BeNumerically("~", gracePeriod, time.Second))

	// An hour before the end: still there.
	clock.SetTime(deleteAfter.Add(-time.Hour))
	Consistently(func(g Gomega) {
		runtimeBackup(g, name)
		infos, err := env.store.List(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(infos).To(HaveLen(1))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// Over: the backups and the RuntimeBackup are gone.
	clock.SetTime(deleteAfter.Add(time.Minute))
	Eventually(func(g Gomega) {
		err := env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, &v1beta2.RuntimeBackup{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	infos, err := env.store.List(ctx, name)
	Expect(err).NotTo(HaveOccurred())
	Expect(infos).To(BeEmpty())
}
