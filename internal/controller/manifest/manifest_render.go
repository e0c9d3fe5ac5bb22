package manifest

import (
	"errors"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// keepRenderRefusal keeps in status.renderRefusal a Helm render of the
// Manifest's content that was stopped at a limit, and clears it once the
// content renders. The renderer refuses a chart whose refusal status keeps
// at once, without rendering it again: also after a restart, which
// forgets the refusals the renderer remembers in memory. Other errors
// (fetching, a template that fails) leave it as it is: they say nothing of
// the refused chart.
func keepRenderRefusal(manifest *v1beta2.Manifest, err error) {
	var refused *render.RefusedError
	switch {
	case err == nil:
		manifest.Status.RenderRefusal = nil
	case errors.As(err, &refused):
		refusal := refused.Refusal
		manifest.Status.RenderRefusal = &refusal
	}
}

// renderRefusedCause is the condition's sentence for a refused render: the
// limit and its flag, never the chart's digest or the limit's value, which
// events and status.renderRefusal give. The render that was stopped and
// the refusals after it say different things, once: that retries no
// longer render is news.
func renderRefusedCause(refused *render.RefusedError) string {
	var limit string
	switch refused.Refusal.Reason {
	case v1beta2.RenderRefusalDeadline:
		limit = "the render deadline (--helm-render-deadline)"
	case v1beta2.RenderRefusalMemory:
		limit = "the render memory limit (--helm-max-render-memory-bytes)"
	default:
		limit = "the rendered output limit (--helm-max-output-bytes)"
	}
	if refused.Before {
		return "the Helm chart is refused without rendering: a render of the same chart and values was stopped at " + limit + " before; it is rendered again when the chart, its values or that limit change (status.renderRefusal)"
	}
	return "rendering the Helm chart was stopped at " + limit + "; it is not rendered again until the chart, its values or that limit change (status.renderRefusal)"
}
