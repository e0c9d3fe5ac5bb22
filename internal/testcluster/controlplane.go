// Package testcluster starts real Kubernetes control planes from the binaries in bin/ for
// tests, the benchmark and the dev environment: real etcd and kube-apiserver, with real TLS,
// RBAC and the project's CRDs, and, for runtimes, the controllers, scheduler and a kwok node
// that make workloads become ready without a container runtime. Mocks would hide exactly the
// behaviour (admission, validation, watch timing, conflicts) the operator must cope with.
//
// Every cluster has its own ports, directory and PKI, so that many can run in one test
// binary, and no process outlives the test binary, however it ends.
package testcluster

import (
	"context"
	"fmt"
)

// ControlPlaneOptions configures StartControlPlane. The zero value is what most tests want.
type ControlPlaneOptions struct {
	// CRDDirectoryPaths lists directories or files with CRDs to install before
	// StartControlPlane returns. Nil installs the project's generated CRDs from
	// config/crd/bases, because a KCP without them is useless to the operator; a non-nil
	// empty slice installs none.
	CRDDirectoryPaths []string
	// KeepDir keeps Dir (logs, etcd data, kubeconfig) after Stop, for debugging.
	KeepDir bool
	// APIServerArgs are appended to kube-apiserver's arguments, after the
	// defaults, so that a later flag wins: a benchmark that measures with a
	// feature gate off, for example.
	APIServerArgs []string
}

// ControlPlane is a Kyma control plane (KCP) for the operator: etcd and kube-apiserver with
// the project's CRDs. It runs no controllers: those under test are the only ones acting.
type ControlPlane struct {
	*Cluster
}

// StartControlPlane starts etcd and kube-apiserver, installs the CRDs and returns once they
// are Established and served. ctx bounds only the start: the control plane runs until Stop
// (or the end of the test binary). On error nothing is left running.
func StartControlPlane(ctx context.Context, opts ControlPlaneOptions) (*ControlPlane, error) {
	crdPaths := opts.CRDDirectoryPaths
	if crdPaths == nil {
		dir, err := defaultCRDDir()
		if err != nil {
			return nil, err
		}
		crdPaths = []string{dir}
	}
	c, err := newCluster(ctx, "controlplane", opts.KeepDir, append([]string{
		// No controller manager runs here to create default ServiceAccounts, so the
		// ServiceAccount admission plugin would reject every Pod (as in envtest).
		"--disable-admission-plugins=ServiceAccount",
	}, opts.APIServerArgs...))
	if err != nil {
		return nil, fmt.Errorf("starting a control plane: %w", err)
	}
	if err := installCRDs(ctx, c.config, crdPaths); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("starting a control plane: %w", err)
	}
	return &ControlPlane{Cluster: c}, nil
}
