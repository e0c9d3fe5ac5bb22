package manifest

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func manifestOf(kyma, name string) *v1beta2.Manifest {
	return &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{
		Namespace: "kcp-system", Name: name, Labels: map[string]string{v1beta2.KymaNameLabel: kyma},
	}}
}

// TestChecksTakeAKymasDueManifestsTogether: a pass over a Kyma takes the
// Manifests due by its moment (give or take checkSlack), leaves the others
// for their own moment, and says how long until then.
func TestChecksTakeAKymasDueManifestsTogether(t *testing.T) {
	c := newChecks(&Reconciler{}, 1)
	defer c.queue.ShutDown()
	c.schedule(manifestOf("a", "a-first"), time.Minute)
	c.schedule(manifestOf("a", "a-second"), time.Minute+time.Second)
	c.schedule(manifestOf("a", "a-later"), 10*time.Minute)
	c.schedule(manifestOf("b", "b-first"), time.Minute)
	kyma := client.ObjectKey{Namespace: "kcp-system", Name: "a"}

	due, next := c.take(kyma, time.Now())
	if len(due) != 0 || next <= 50*time.Second || next > time.Minute {
		t.Fatalf("before the moment: took %v, next in %s; want none, next in about a minute", due, next)
	}

	due, next = c.take(kyma, time.Now().Add(time.Minute))
	if len(due) != 2 || !slices.Contains(due, "a-first") || !slices.Contains(due, "a-second") {
		t.Fatalf("at the moment: took %v, want a-first and a-second", due)
	}
	if next < 8*time.Minute || next > 9*time.Minute {
		t.Fatalf("next in %s, want the later one's moment, about 9 minutes on", next)
	}

	due, next = c.take(kyma, time.Now().Add(10*time.Minute))
	if len(due) != 1 || due[0] != "a-later" || next != 0 {
		t.Fatalf("at the later moment: took %v, next in %s; want a-later and nothing left", due, next)
	}
	if _, ok := c.due[kyma]; ok {
		t.Fatal("a Kyma with nothing left to check is forgotten")
	}
	if _, ok := c.due[client.ObjectKey{Namespace: "kcp-system", Name: "b"}]["b-first"]; !ok {
		t.Fatal("another Kyma's Manifests are not taken")
	}
}

// TestChecksUnscheduleForgetsAManifest: a Manifest whose reconcile ended in
// another state is not checked.
func TestChecksUnscheduleForgetsAManifest(t *testing.T) {
	c := newChecks(&Reconciler{}, 1)
	defer c.queue.ShutDown()
	m := manifestOf("a", "a-first")
	c.schedule(m, time.Minute)
	c.unschedule(m)
	if due, next := c.take(client.ObjectKey{Namespace: "kcp-system", Name: "a"}, time.Now().Add(time.Hour)); len(due) != 0 || next != 0 {
		t.Fatalf("took %v, next in %s; want nothing", due, next)
	}
}

// TestChecksPutBackKeepsAnEarlierSchedule: Manifests put back for want of a
// runtime slot come back after the wait, unless rescheduled meanwhile.
func TestChecksPutBackKeepsAnEarlierSchedule(t *testing.T) {
	c := newChecks(&Reconciler{}, 1)
	defer c.queue.ShutDown()
	kyma := client.ObjectKey{Namespace: "kcp-system", Name: "a"}
	c.schedule(manifestOf("a", "a-rescheduled"), time.Hour)
	c.putBack(kyma, []string{"a-waiting", "a-rescheduled"}, 2*time.Second)
	due, _ := c.take(kyma, time.Now().Add(2*time.Second))
	if len(due) != 1 || due[0] != "a-waiting" {
		t.Fatalf("took %v, want a-waiting only", due)
	}
}
