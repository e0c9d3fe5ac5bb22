package pause_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
)

func TestPaused(t *testing.T) {
	group, err := labels.Parse("region in (eu-1)")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		policy pause.Policy
		labels map[string]string
		want   bool
	}{
		{name: "no label", labels: nil, want: false},
		{name: "skip label true", labels: map[string]string{v1beta2.SkipReconciliationLabel: "true"}, want: true},
		{name: "skip label TRUE", labels: map[string]string{v1beta2.SkipReconciliationLabel: "TRUE"}, want: true},
		{name: "skip label false", labels: map[string]string{v1beta2.SkipReconciliationLabel: "false"}, want: false},
		{name: "paused group", policy: pause.Policy{Group: group}, labels: map[string]string{"region": "eu-1"}, want: true},
		{name: "other group", policy: pause.Policy{Group: group}, labels: map[string]string{"region": "us-1"}, want: false},
		{name: "empty selector pauses nothing", policy: pause.Policy{Group: labels.Everything()}, labels: map[string]string{"region": "eu-1"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}
			if got := tt.policy.Paused(kyma); got != tt.want {
				t.Fatalf("Paused() = %v, want %v", got, tt.want)
			}
		})
	}
}
