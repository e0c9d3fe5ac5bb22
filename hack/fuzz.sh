#!/usr/bin/env bash
# Runs every Go fuzz target (func FuzzXxx(f *testing.F)) of the repository's
# modules for the given time each, one after the other, in its own package.
# Targets are found in the sources, not with `go test -list`, which would run
# each package's TestMain (some start API servers) just to list them.
# A failure stops the run; Go writes the failing input to the package's
# testdata/fuzz/<FuzzXxx>/, where it becomes a regression case once
# committed (plain `go test` replays it).
set -euo pipefail

fuzztime=${1:?usage: fuzz.sh FUZZTIME [go test flags...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)

targets=0
for module in "$root" "$root/api"; do
	while read -r dir; do
		for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*(' "$dir"/*_test.go 2>/dev/null | sed 's/^func //; s/($//' | sort -u); do
			targets=$((targets + 1))
			echo "== ${dir#"$root"/} $name ($fuzztime)"
			(cd "$dir" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$@" .)
		done
	done < <(cd "$module" && go list -f '{{.Dir}}' ./...)
done
echo "== $targets fuzz targets, $fuzztime each"
