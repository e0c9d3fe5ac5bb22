package testcluster

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// crdTimeout bounds how long CRDs may take to be Established and appear in discovery.
const crdTimeout = 30 * time.Second

// installCRDs creates the CRDs found in paths and waits until each is Established and
// served by discovery, so that a client or cache created right after the start finds them.
// Reading and creating reuse envtest's code rather than a second YAML loader.
func installCRDs(ctx context.Context, cfg *rest.Config, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              paths,
		ErrorIfPathMissing: true,
		MaxTime:            crdTimeout,
		PollInterval:       readyPollInterval,
	})
	if err != nil {
		return fmt.Errorf("installing CRDs from %v: %w", paths, err)
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating an apiextensions client: %w", err)
	}
	for _, crd := range crds {
		var last error
		err := wait.PollUntilContextTimeout(ctx, readyPollInterval, crdTimeout, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				last = err
				return false, nil // Transient until the timeout; reported below.
			}
			return established(got), nil
		})
		if err != nil && last != nil {
			err = fmt.Errorf("%w (last error: %w)", err, last)
		}
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be Established: %w", crd.Name, err)
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
