package lmctl

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
)

// kubeFlags reach a control plane the way kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, and its current context.
type kubeFlags struct {
	kubeconfig string
	namespace  string
}

func (k *kubeFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "Kubeconfig of the control plane (default: $KUBECONFIG, then ~/.kube/config).")
	fs.StringVarP(&k.namespace, "namespace", "n", "kcp-system", "Control-plane namespace of the Kymas and the module catalog.")
}

func (k *kubeFlags) client() (client.Client, error) {
	cfg, scheme, err := k.config()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// live watches kinds in the namespace of the flags (watch.go).
func (k *kubeFlags) live(ctx context.Context, kinds ...client.Object) (live, error) {
	cfg, scheme, err := k.config()
	if err != nil {
		return live{}, err
	}
	return startLive(ctx, cfg, scheme, k.namespace, kinds...)
}

func (k *kubeFlags) config() (*rest.Config, *k8sruntime.Scheme, error) {
	// The client logs nothing lmctl's user needs; without a logger
	// controller-runtime prints a warning with a stack trace once the
	// process is 30 s old, in the middle of lmctl status -w.
	ctrllog.SetLogger(logr.Discard())
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading the control plane's kubeconfig: %w", err)
	}
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	return cfg, scheme, nil
}
