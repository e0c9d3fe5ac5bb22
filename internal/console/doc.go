// Package console is the fleet console (SPEC G9, R11; docs/console.md):
// every runtime and module at a glance in a browser, live and RBAC-aware.
//
// It serves server-rendered HTML from an informer cache of its own, which
// holds the Kymas, the module catalog, the rollouts, the backups and a
// trimmed copy of the Manifests (their operation history), never Secrets:
// no Secret, kubeconfig or key can be served because none is read. Who
// looks is decided by an Authenticator, what they see by an Access, both
// per request (access.go): the in-cluster console asks the API server
// (consoleauth), `lmctl console` runs with its user's own kubeconfig.
// Changes reach open pages over server-sent events from the informers'
// handlers (hub.go): a change costs each viewer O(1), and a page then
// fetches the fragments that changed from the console, not from the API
// server.
package console
