package operator

// The operator's rights in the control plane. `make manifests` generates
// config/rbac/role.yaml from the markers below (controller-gen rbac); the
// kustomize layout and the Helm chart bind them to the operator's
// ServiceAccount, and internal/testenv runs every integration test with the
// operator impersonating that ServiceAccount, so a missing right fails a
// test (docs/install.md lists what each right is for).
//
// The rights are namespaced wherever the API allows: everything the operator
// keeps lives in its namespace (--namespace, kcp-system), the watcher's CA
// and runtime certificates in the PKI namespace (--watcher-pki-namespace).
// Cluster-wide, it reads CRDs and, by name, the PKI namespace itself.
// Runtimes are reached with their own kubeconfigs, never with these rights.
//
// Kymas: the operator reconciles them and owns their status and finalizer;
// it never creates or deletes one.
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=kymas,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=kymas/status,verbs=patch
//
// Manifests: created, applied, labelled and deleted for the Kymas' modules.
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=manifests,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=manifests/status,verbs=patch
//
// The module catalog is read only.
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=moduletemplates;modulereleasemetas,verbs=get;list;watch
//
// Rollout policies are the SREs'; their status is the operator's.
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=modulerollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=modulerollouts/status,verbs=patch;update
//
// RuntimeBackups are the operator's: one created per backed-up Kyma,
// deleted with its backups when the grace period after the Kyma's
// deletion ends. The backup key Secrets are read with the Secrets above.
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=runtimebackups,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=runtimebackups/status,verbs=patch
//
// Watchers: the default one is created at start; status is the operator's.
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=watchers,verbs=get;list;watch;create
// Patch of Watchers and ModuleReleaseMetas: only to remove the Kyma
// lifecycle-manager's finalizers from them (--klm-takeover,
// internal/controller/takeover).
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=watchers;modulereleasemetas,verbs=patch
// +kubebuilder:rbac:groups=operator.kyma-project.io,namespace=kcp-system,resources=watchers/status,verbs=patch
//
// Runtime kubeconfig Secrets and the registry credentials are read; the
// kubeconfig Secrets of modules whose operator runs in the control plane
// (their own tokens, never the runtime's admin credential) are written.
// +kubebuilder:rbac:groups="",namespace=kcp-system,resources=secrets,verbs=get;list;watch;create;patch;delete
//
// Events on Kymas and Manifests (events.k8s.io), and the leader election
// Lease with its events (client-go's leader election records core Events).
// +kubebuilder:rbac:groups=events.k8s.io,namespace=kcp-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=kcp-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=kcp-system,resources=leases,verbs=get;create;update
//
// The leader labels its own Pod, and every process clears the label from
// its own at start and stop (internal/leaderpod): the listener's Service
// selects it. A merge patch, so no read.
// +kubebuilder:rbac:groups="",namespace=kcp-system,resources=pods,verbs=patch
//
// The control plane's Kyma and ModuleTemplate CRDs are copied into each
// runtime (internal/controller/kyma, RuntimeCRDs). Read through the cache,
// which lists and watches CRDs cluster-wide: they are schemas, not data.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
//
// The watcher CA and the runtimes' certificates.
// +kubebuilder:rbac:groups="",namespace=lifecycle-manager-pki,resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,resourceNames=lifecycle-manager-pki,verbs=get
