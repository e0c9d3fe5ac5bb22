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

# fuzz_one runs one target. Go's fuzzer can end a short run with "context
# deadline exceeded" when the time runs out while it is still gathering its
# baseline or minimizing a new interesting (not failing) input; no input is
# written then. That is retried once; a real failure always writes its input
# to testdata/fuzz and fails at once.
fuzz_one() {
	local dir=$1 name=$2 out
	shift 2
	for attempt in 1 2; do
		if out=$(cd "$dir" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$@" . 2>&1); then
			echo "$out"
			return 0
		fi
		echo "$out"
		if [[ $attempt == 2 || $out == *"Failing input written to"* || $out != *"context deadline exceeded"* ]]; then
			return 1
		fi
		echo "== $name ran out of time without a failing input; once more"
	done
}

targets=0
for module in "$root" "$root/api"; do
	while read -r dir; do
		for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*(' "$dir"/*_test.go 2>/dev/null | sed 's/^func //; s/($//' | sort -u); do
			targets=$((targets + 1))
			echo "== ${dir#"$root"/} $name ($fuzztime)"
			fuzz_one "$dir" "$name" "$@"
		done
	done < <(cd "$module" && go list -f '{{.Dir}}' ./...)
done
echo "== $targets fuzz targets, $fuzztime each"
