package operator

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener"
)

// TestAgentLiveness: a Kyma without a runtime id or with reporting paused
// has no agent; otherwise the listener's Health says heard, silent, or
// (within the grace after a start, never heard) pending.
func TestAgentLiveness(t *testing.T) {
	const timeout = time.Minute
	start := time.Now()
	health := listener.NewHealth(timeout)
	health.Seen("heard", start)
	w := watcherReporting{health: health, watched: func(k *v1beta2.Kyma) bool { return k.Labels["paused"] == "" }}
	kymaOf := func(id string, labels ...string) *v1beta2.Kyma {
		k := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if id != "" {
			k.Labels[v1beta2.RuntimeIDLabel] = id
		}
		for _, l := range labels {
			k.Labels[l] = "true"
		}
		return k
	}
	tests := []struct {
		name string
		kyma *v1beta2.Kyma
		now  time.Time
		want kyma.AgentLiveness
	}{
		{"no runtime id", kymaOf(""), start, kyma.AgentNotWatched},
		{"reporting paused", kymaOf("heard", "paused"), start, kyma.AgentNotWatched},
		{"heard", kymaOf("heard"), start.Add(time.Second), kyma.AgentHeard},
		{"never heard, within the grace", kymaOf("new"), start.Add(time.Second), kyma.AgentPending},
		{"never heard, past the grace", kymaOf("new"), start.Add(2 * timeout), kyma.AgentSilent},
		{"heard, then silent past the timeout", kymaOf("heard"), start.Add(2 * timeout), kyma.AgentSilent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.AgentLiveness(tt.kyma, tt.now); got != tt.want {
				t.Fatalf("AgentLiveness = %d, want %d", got, tt.want)
			}
		})
	}
}
