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

// nextMonday is the first Monday 00:00 UTC after t.
func nextMonday(t time.Time) time.Time {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return day.AddDate(0, 0, 7-(int(day.Weekday())+6)%7)
}

// After five weeks of daily backups and then thirty hours of hourly ones,
// exactly the grandfather-father-son set is left in the registry: the last
// 24 hours, the last backup of each of the 7 days, and of each of the 4
// weeks (ISO weeks, Monday first).
//
// The fake clock only moves forward (the package's Kymas share it), and an
// earlier run of this test (-count) or of TestGracePeriod left it weeks
// ahead; the five weeks start on the next Monday, under a name of their
// own, so that no backup of an earlier run is in the set.
func TestRetentionLeavesTheGFSSet(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	monday := nextMonday(clock.Now())
	name := "gfs-" + monday.Format("20060102")
	day := func(d int) time.Time { return monday.AddDate(0, 0, d).Add(12 * time.Hour) } // noon of day d
	hour := func(h int) time.Time { return monday.AddDate(0, 0, 35).Add(time.Duration(h) * time.Hour) }
	// Monday, before the first backup.
	advance(monday.Add(30 * time.Minute))
	register(t, name, env.runtimes[0])
	t.Cleanup(func() { unregister(name) })
	Eventually(func(g Gomega) {
		g.Expect(runtimeBackup(g, name).Status.NextScheduleTime).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())

	// Daily at noon, five weeks from Monday (day 0) to Sunday (day 34).
	for d := range 35 {
		backupAt(name, day(d))
	}
	// Hourly, the sixth Monday 00:00 to Tuesday 05:00.
	for h := range 30 {
		backupAt(name, hour(h))
	}

	var want []string
	for _, d := range []int{20, 27} { // the Sundays of weeks 3 and 4
		want = append(want, backup.Tag(day(d)))
	}
	for d := 30; d <= 34; d++ { // days Wednesday to Sunday of week 5
		want = append(want, backup.Tag(day(d)))
	}
	for h := 6; h < 30; h++ { // the last 24 hours; they hold Monday's and Tuesday's last, and this week's
		want = append(want, backup.Tag(hour(h)))
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
	backupAtNext(name)
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
