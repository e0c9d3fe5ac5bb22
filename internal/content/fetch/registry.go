package fetch

import (
	"fmt"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// RegistryOptions are the options to read the registry at host exactly as
// content is read: through the guarded transport (allowed hosts, public
// addresses), within the size cap and the in-flight budget, over plain
// HTTP for insecure registries, with the registry credentials. It refuses
// a host outside the allow-list before any request. Readers of formats
// that keep content in a registry by their own layout (OCM component
// versions) use it, so that they reach no registry content links could
// not.
func (f *Fetcher) RegistryOptions(host string) ([]ociartifact.Option, error) {
	if err := f.policy.permits(host); err != nil {
		return nil, fmt.Errorf("registry %s: %w", host, err)
	}
	return f.ociOptions(host), nil
}
