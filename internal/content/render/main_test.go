package render_test

import (
	"os"
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// TestMain serves the render processes that HelmRenderer starts from this
// test binary.
func TestMain(m *testing.M) {
	render.ServeIfRenderProcess()
	os.Exit(m.Run())
}
