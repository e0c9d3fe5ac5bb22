// Package ha runs the operator as several processes against one control
// plane, as a Deployment with replicas and shards does (SPEC G8): the fleet
// is split into shards by a hash of each Kyma's name, each shard has one
// leader, and a standby of a shard takes over its Kymas when the leader is
// killed, without reinstalling anything.
package ha

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

const kcpNamespace = "kcp-system"

// runtimeCount is one runtime per Kyma: two Kymas in each of two shards.
const runtimeCount = 4

var env struct {
	kcp       *testcluster.ControlPlane
	kcpClient client.Client
	registry  *testregistry.Registry
	runtimes  []*testcluster.Runtime
	// bin is the operator binary, dir a directory for its logs.
	bin, dir string
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "ha", Runtimes: runtimeCount, Namespace: kcpNamespace, ExternalOperator: true}, setup)
}

// setup publishes the evolving module (ConfigMaps only) and builds the
// operator; each test starts its processes.
func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.kcpClient, env.runtimes = e.KCP, e.Client, e.Runtimes
	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)
	v, err := samplemodules.Get(samplemodules.Evolving, "1.0.0")
	if err != nil {
		return operator.Options{}, err
	}
	artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), v.Module, v.Version), v.Content.Layers(), ociartifact.Insecure())
	if err != nil {
		return operator.Options{}, err
	}
	if err := env.kcpClient.Create(ctx, v.Template(kcpNamespace, artifact.Links)); err != nil {
		return operator.Options{}, err
	}
	if err := env.kcpClient.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, v.Module, map[string]string{"regular": v.Version})); err != nil {
		return operator.Options{}, err
	}

	if env.dir, err = os.MkdirTemp("", "ha-operator-"); err != nil {
		return operator.Options{}, err
	}
	e.Cleanup(func() { _ = os.RemoveAll(env.dir) })
	root, err := testcluster.RepoRoot()
	if err != nil {
		return operator.Options{}, err
	}
	env.bin = filepath.Join(env.dir, "lifecycle-manager")
	return operator.Options{}, testcluster.GoBuild(root, "./cmd/lifecycle-manager", env.bin)
}
