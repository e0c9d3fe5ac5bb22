// Package modulekit is the module developer kit's done-when (SPEC R16): the
// template operator is built and pushed with `lmctl module build` and
// `push`, the printed ModuleTemplate and ModuleReleaseMeta are applied to a
// real control plane as they are, and the module becomes Ready in a kwok
// runtime through the operator, its own operator (the template operator)
// running in-process against the runtime as its Deployment would.
package modulekit

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
)

const kcpNamespace = "kcp-system"

var env struct {
	e        *testenv.Env
	runtime  *testcluster.Runtime
	registry *testregistry.Registry
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "modulekit", Runtimes: 1, Namespace: kcpNamespace}, setup)
}

func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.e, env.runtime = e, e.Runtimes[0]
	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)

	// The template operator's manager, as its Deployment would run it in
	// the runtime; it waits for its CRD, which the module installs.
	opCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- templateoperator.Run(opCtx, env.runtime.Config(), templateoperator.RunOptions{CRDPoll: 200 * time.Millisecond})
	}()
	e.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "template operator:", err)
		}
	})

	opts := e.OperatorOptions()
	opts.Content.InsecureRegistries = []string{env.registry.Host()}
	return opts, nil
}
