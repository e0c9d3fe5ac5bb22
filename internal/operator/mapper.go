package operator

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// newControlPlaneMapper is the manager's REST mapper: controller-runtime's
// dynamic mapper, with the mappings it found remembered. Every read from the
// manager's cache asks the mapper whether the kind is namespaced, and the
// dynamic mapper answers by asking each API group's mapper in turn (an error
// made and dropped per group): about 70 µs, a fifth of an idle drift check's
// CPU. The operator's kinds in the control plane do not change scope while
// it runs, so a mapping found once is the answer for good; kinds not found
// are not remembered (remote.RememberingMapper, which runtimes use too).
func newControlPlaneMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return remote.RememberingMapper{RESTMapper: dynamic, Found: &remote.FoundMappings{}}, nil
}
