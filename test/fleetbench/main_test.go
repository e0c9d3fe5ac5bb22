package fleetbench

import (
	"os"
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// TestMain serves the Helm render processes that the operator under test
// starts from this test binary.
func TestMain(m *testing.M) {
	render.ServeIfRenderProcess()
	os.Exit(m.Run())
}
