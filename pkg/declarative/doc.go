// Package declarative is a small library for module operators: reconcile a
// custom resource by rendering manifests from it, applying them with
// server-side apply, and reporting the result in the resource's status the
// way Kyma modules do (status.state Ready, Processing, Error or Deleting, and
// a Ready condition), which is what the lifecycle manager reads to tell a
// module's health (docs/modules.md, "Default custom resource and
// readiness").
//
// It lives under pkg/, not internal/, so that module operators outside this
// repository (scaffolded with `lmctl module init`) can import it; the
// template operator (modules/template-operator) is its reference user.
package declarative
