package index_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
)

func TestKymaNameOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{"labelled", map[string]string{v1beta2.KymaNameLabel: "kyma-a"}, []string{"kyma-a"}},
		{"no labels", nil, nil},
		{"other labels only", map[string]string{v1beta2.ModuleNameLabel: "kyma-a"}, nil},
		{"empty value", map[string]string{v1beta2.KymaNameLabel: ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
			got := index.KymaNameOf(m)
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Fatalf("KymaNameOf(%v) = %v, want %v", tc.labels, got, tc.want)
			}
		})
	}
}
