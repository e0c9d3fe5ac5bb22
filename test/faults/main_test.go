// Package faults is the fault suite: the operator, built and run as its own
// process, against a real control plane, kwok runtimes and an OCI registry,
// while parts of that fail for real: the control plane's API server and
// etcd restart, the operator is killed with SIGKILL mid-install and
// mid-delete, a runtime is unreachable for minutes or replaced by an empty
// cluster at the same address, the registry is down during an upgrade. Each
// test asserts that nothing installed was deleted, that no Manifest was
// duplicated or recreated, and that everything converged without help.
//
// The tests restart shared parts, so they run one after the other. The
// suite takes minutes; it runs only when LM_FAULTS is set, which
// `make test-faults` does.
package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// enableEnv must be set for the suite to run (make test-faults sets it), so
// that `make test` does not spend minutes on it.
const enableEnv = "LM_FAULTS"

// kcpNamespace is where the operator under test keeps Kymas and the catalog.
const kcpNamespace = "kcp-system"

// backoffCap is the operator's --backoff-max.
const backoffCap = 5 * time.Second

// The runtimes: main is where most tests install; other keeps working while
// main is unreachable; wiped is replaced by an empty cluster, so that what
// that leaves behind cannot affect another test.
const (
	mainRuntime = iota
	otherRuntime
	wipedRuntime
	runtimeCount
)

var env struct {
	kcp       *testcluster.ControlPlane
	kcpClient client.Client
	registry  *testregistry.Registry
	operator  *operatorProcess
	gates     gates
	runtimes  []*runtimeHandle
}

func TestMain(m *testing.M) {
	if os.Getenv(enableEnv) == "" {
		fmt.Printf("faults: skipped; the fault suite runs with %s=1 (make test-faults)\n", enableEnv)
		os.Exit(0)
	}
	testenv.Main(m, testenv.Config{Name: "faults", Runtimes: runtimeCount, Namespace: kcpNamespace, ExternalOperator: true}, setup)
}

// setup publishes the modules, starts a module operator per runtime and the
// operator under test as a process.
func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.kcpClient = e.KCP, e.Client
	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)
	if err := publishModules(ctx, env.kcpClient, env.registry.Host()); err != nil {
		return operator.Options{}, err
	}
	for i, r := range e.Runtimes {
		h, err := newRuntimeHandle(fmt.Sprintf("runtime-%d", i), r)
		if err != nil {
			return operator.Options{}, err
		}
		env.runtimes = append(env.runtimes, h)
		go func() { _ = runModuleOperator(ctx, r.Config(), &env.gates) }()
	}

	dir, err := os.MkdirTemp("", "faults-operator-")
	if err != nil {
		return operator.Options{}, err
	}
	e.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin, err := buildOperator(dir)
	if err != nil {
		return operator.Options{}, err
	}
	env.operator = &operatorProcess{
		bin:     bin,
		args:    operatorArgs(env.kcp.KubeconfigPath(), env.registry.Host()),
		logPath: filepath.Join(dir, "operator.log"),
	}
	if err := env.operator.start(); err != nil {
		return operator.Options{}, err
	}
	e.Cleanup(func() { _ = env.operator.kill() })
	return operator.Options{}, nil
}
