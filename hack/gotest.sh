#!/usr/bin/env bash
# Runs go test through gotestsum in each module directory of GOTEST_MODULES
# (default: the root module), with the given go test arguments, then prints
# hack/testreport's summary of all of them: package times slowest first, every
# failed test with its failure lines, and a closing "LABEL: N passed, N
# failed, N skipped" line. gotestsum prints each package as it finishes and
# the full output of every failure. The exit code is go test's (non-zero when
# anything failed to build or pass).
#
# usage: gotest.sh GOTESTSUM LABEL [go test args...]
set -uo pipefail

gotestsum=${1:?usage: gotest.sh GOTESTSUM LABEL [go test args...]}
label=${2:?}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
events=$(mktemp -d)
trap 'rm -rf "$events"' EXIT
# Ctrl-C reaches go test through gotestsum; stop here too, report included.
trap 'exit 130' INT TERM

# One gotestsum for all modules, so that the run has one summary and one
# DONE line; the modules' go test -json streams follow each other.
rc=0
"$gotestsum" --format pkgname-and-test-fails --format-hide-empty-pkg --jsonfile "$events/events.json" \
	--raw-command -- bash -c '
		root=$1; shift; rc=0
		for module in ${GOTEST_MODULES:-.}; do
			(cd "$root/$module" && go test -json "$@") || rc=$?
		done
		exit $rc' gotest "$root" "$@" || rc=$?

(cd "$root" && go run ./hack/testreport -label "$label" -module "$(go list -m)" "$events/events.json") || { [ "$rc" != 0 ] || rc=1; }
exit "$rc"
