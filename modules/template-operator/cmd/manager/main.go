// Command manager is the template operator's manager, the binary of its
// Deployment: it reconciles Samples in the cluster it runs in.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
)

func main() {
	ctrl.SetLogger(zap.New())
	if err := templateoperator.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), templateoperator.RunOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "template-operator:", err)
		os.Exit(1)
	}
}
