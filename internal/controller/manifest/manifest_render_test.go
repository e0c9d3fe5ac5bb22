package manifest

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

func TestKeepRenderRefusal(t *testing.T) {
	old := &v1beta2.RenderRefusal{Digest: "sha256:old", Reason: v1beta2.RenderRefusalDeadline, Limit: "10s"}
	refusal := v1beta2.RenderRefusal{Digest: "sha256:new", Reason: v1beta2.RenderRefusalMemory, Limit: "512Mi"}
	tests := []struct {
		name string
		err  error
		want *v1beta2.RenderRefusal
	}{
		{name: "rendered: the refusal goes", err: nil, want: nil},
		{name: "stopped at a limit, behind the pipeline's wrapping", err: fmt.Errorf("x: %w",
			&content.PartError{Stage: content.StageRender, Part: v1beta2.HelmChartResourceName, Err: &render.RefusedError{Refusal: refusal}}), want: &refusal},
		{name: "refused again", err: &render.RefusedError{Refusal: refusal, Before: true}, want: &refusal},
		{name: "fetching failed: the refusal stays", err: errors.New("fetching helm-chart: 503"), want: old},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &v1beta2.Manifest{}
			m.Status.RenderRefusal = old.DeepCopy()
			keepRenderRefusal(m, tt.err)
			NewWithT(t).Expect(m.Status.RenderRefusal).To(Equal(tt.want))
		})
	}
}
