// Package install tests the operator's installation as users apply it:
// config/default with kustomize and charts/lifecycle-manager with Helm,
// rendered, compared, and applied with strict server-side validation to a
// real API server that has none of the project's CRDs beforehand.
package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

var (
	kcp    *testcluster.ControlPlane
	admin  client.Client
	root   string
	chart  string
	config string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if root, err = testcluster.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	chart = filepath.Join(root, "charts", "lifecycle-manager")
	config = filepath.Join(root, "config", "default")
	// No CRDs: the installation brings them.
	kcp, err = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = kcp.Stop() }()
	if admin, err = testenv.NewClient(kcp.Config()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
