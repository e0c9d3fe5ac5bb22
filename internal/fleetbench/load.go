package fleetbench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// runtimeLabel names, on each bench Kyma, the runtime API server it shares.
const runtimeLabel = "fleetbench.runtime-fleet.dev/runtime"

// kymaName is the name of the i-th Kyma; zero-padded so that names sort in
// creation order.
func kymaName(i int) string {
	return fmt.Sprintf("kyma-%05d", i)
}

// createKymas registers n runtimes, spread round-robin over the runtime API
// servers' kubeconfigs, each as a kubeconfig Secret and a Kyma whose sync
// namespace is its own name (SPEC R19), concurrency at a time. It counts its
// own successful writes into writes, so that the operator's writes can be
// told from the benchmark's.
func createKymas(ctx context.Context, c client.Client, namespace string, n int, kubeconfigs [][]byte, modules []string, concurrency int, writes *atomic.Int64) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i := range n {
		g.Go(func() error {
			secret, kyma := kymaObjects(i, namespace, kubeconfigs, modules)
			if err := c.Create(ctx, secret); err != nil {
				return fmt.Errorf("registering runtime %s: %w", kyma.Name, err)
			}
			writes.Add(1)
			if err := c.Create(ctx, kyma); err != nil {
				return fmt.Errorf("creating Kyma %s: %w", kyma.Name, err)
			}
			writes.Add(1)
			return nil
		})
	}
	return g.Wait()
}

// kymaObjects are the i-th Kyma, on runtime API server i mod the
// kubeconfigs, and its kubeconfig Secret.
func kymaObjects(i int, namespace string, kubeconfigs [][]byte, modules []string) (*corev1.Secret, *v1beta2.Kyma) {
	name := kymaName(i)
	rt := i % len(kubeconfigs)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-kubeconfig", Namespace: namespace,
			Labels: map[string]string{v1beta2.KymaNameLabel: name},
		},
		Data: map[string][]byte{remote.KubeconfigKey: kubeconfigs[rt]},
	}
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{v1beta2.RuntimeIDLabel: name, runtimeLabel: strconv.Itoa(rt)},
		},
		Spec: v1beta2.KymaSpec{Channel: benchChannel, SyncNamespace: name},
	}
	for _, m := range modules {
		kyma.Spec.Modules = append(kyma.Spec.Modules, v1beta2.Module{
			Name: m, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
		})
	}
	return secret, kyma
}

// moveChannel points the bench channel of every module at version: the
// fleet-wide upgrade. One write per module, counted into writes.
func moveChannel(ctx context.Context, c client.Client, namespace string, modules []string, version string, writes *atomic.Int64) error {
	for _, module := range modules {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			meta := &v1beta2.ModuleReleaseMeta{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: module}, meta); err != nil {
				return err
			}
			for i := range meta.Spec.Channels {
				if meta.Spec.Channels[i].Channel == benchChannel {
					meta.Spec.Channels[i].Version = version
				}
			}
			if err := c.Update(ctx, meta); err != nil {
				return err
			}
			writes.Add(1)
			return nil
		})
		if err != nil {
			return fmt.Errorf("moving channel %s of module %s to %s: %w", benchChannel, module, version, err)
		}
	}
	return nil
}

// RawWrites is the control-plane API server's raw write rate: a tight loop
// of small ConfigMap creates. It is the ceiling the operator's write rate is
// compared with.
type RawWrites struct {
	Writes      int     `json:"writes"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"perSecond"`
	// Counted is what the API server itself counted, as a check that the
	// loop measured what it claims.
	Counted float64 `json:"counted"`
}

// rawWriteRate creates n small ConfigMaps in a namespace of their own,
// concurrency at a time, with the client limits cfg carries — the same as
// the operator's control-plane client.
func rawWriteRate(ctx context.Context, c client.Client, n, concurrency int) (RawWrites, error) {
	const namespace = "fleetbench-raw"
	if err := remote.EnsureNamespace(ctx, c, namespace); err != nil {
		return RawWrites{}, err
	}
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i := range n {
		g.Go(func() error {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "raw-" + strconv.Itoa(i), Namespace: namespace},
				Data:       map[string]string{"index": strconv.Itoa(i)},
			}
			if err := c.Create(gctx, cm); err != nil {
				return fmt.Errorf("raw write %d: %w", i, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return RawWrites{}, err
	}
	elapsed := time.Since(start)
	return RawWrites{Writes: n, Concurrency: concurrency, Seconds: elapsed.Seconds(), PerSecond: float64(n) / elapsed.Seconds()}, nil
}

// withLimits returns a copy of cfg with the given client-side rate limits;
// a negative QPS disables the limiter, as controller-runtime's GetConfig
// does for the operator's control-plane client in production.
func withLimits(cfg *rest.Config, qps float32, burst int) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.QPS = qps
	out.Burst = burst
	return out
}
