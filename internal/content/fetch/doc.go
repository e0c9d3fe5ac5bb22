// Package fetch reads a module's content parts from where a ModuleTemplate
// links them: OCI registries (by digest) and http(s) URLs.
//
// Content is addressed by its sha256 digest. That makes it immutable, so it is
// cached by digest in memory (bounded, least recently used first out) and,
// when configured, on disk, where it survives restarts. The control plane
// fetches the same few module versions for thousands of runtimes; without the
// cache every reconcile of every runtime would download them again.
//
// Links are pinned once, when a Manifest is made (Fetcher.Pin): a tag is
// resolved to a layer digest and an http(s) URL gets the digest of its body.
// Fetch then accepts only pinned links, so every runtime in a rollout gets the
// same bytes whatever happens to tags and URLs later.
//
// Links are written by module teams, and the operator can reach what they
// cannot, so this package is a trust boundary: content comes only from
// allowed hosts; non-public addresses (loopback, link-local, private) are
// refused when dialled unless the SRE listed the host; redirects never leave
// https, nor the host of an http(s) link; only insecure registries get plain
// HTTP; every layer and body is capped, and all downloads in flight share a
// byte budget; errors carry no response bodies.
package fetch
