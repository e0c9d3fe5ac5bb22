package fleetbench

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
)

// Lateness is measured against each Kyma's own jittered time: on time is
// 0, a backup of the round before that finished after the firing does not
// count, and one of the next round is measured against the next round's.
func TestLateness(t *testing.T) {
	schedules, err := backup.Parse([]byte("schedules:\n  - {name: s, schedule: '@every 5m', repository: r.io/b, keySecret: k}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := &schedules.Schedules[0]
	roundStart := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	rb := func(name string, taken time.Time) v1beta2.RuntimeBackup {
		r := v1beta2.RuntimeBackup{}
		r.Name = name
		r.Status.LastSuccessfulTime = &metav1.Time{Time: taken}
		return r
	}
	due := func(name string) time.Time { return s.NextFor(name, roundStart.Add(-time.Second)) }
	var list []v1beta2.RuntimeBackup
	for i := range 99 {
		name := fmt.Sprintf("on-time-%d", i)
		list = append(list, rb(name, due(name)))
	}
	list = append(list,
		rb("late", due("late").Add(7*time.Second)),
		rb("previous-round", due("previous-round").Add(-time.Second)),
		rb("next-round", due("next-round").Add(5*time.Minute+2*time.Second)),
	)
	maxLate, p99 := lateness(s, list, roundStart)
	if maxLate != 7 || p99 != 2 {
		t.Errorf("lateness = max %v, p99 %v; want 7 and 2", maxLate, p99)
	}
}
