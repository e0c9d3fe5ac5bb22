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

rc=0
n=0
for module in ${GOTEST_MODULES:-.}; do
	n=$((n + 1))
	(cd "$root/$module" && "$gotestsum" --format pkgname-and-test-fails --format-hide-empty-pkg \
		--jsonfile "$events/$n.json" -- "$@") || rc=$?
done

(cd "$root" && go run ./hack/testreport -label "$label" -module "$(go list -m)" "$events"/*.json) || { [ "$rc" != 0 ] || rc=1; }
exit "$rc"
