#!/usr/bin/env bash
# Runs the given test packages COUNT times each (go test -count) while one
# busy loop per core keeps every core busy, so that tests which only pass on
# an idle machine (a wait shorter than the work under load, a race between
# goroutines or processes) fail here instead of now and then in CI. At the
# end hack/testreport lists every failed run of every test with its package
# and failure lines, and a closing "stress: N passed, N failed, N skipped"
# line. The burners stop when this script ends, however it ends: on Ctrl-C
# and on errors through the trap, and even after a SIGKILL, since each one
# also watches this script's process and stops when it is gone.
#
# usage: stress.sh GOTESTSUM COUNT [go test args and packages...]
# STRESS_TIMEOUT is go test's -timeout (default 30m per count); STRESS_BURNERS
# the number of busy loops (default: one per core).
set -uo pipefail

gotestsum=${1:?usage: stress.sh GOTESTSUM COUNT [go test args and packages...]}
count=${2:?}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
burners=${STRESS_BURNERS:-$(nproc)}
timeout=${STRESS_TIMEOUT:-$((30 * count))m}

pids=()
stop_burners() {
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null
		wait "${pids[@]}" 2>/dev/null
	fi
	pids=()
}
trap stop_burners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

self=$$
for _ in $(seq "$burners"); do
	# A busy loop that looks every 200000 turns (well under a second) whether
	# this script is still there.
	(while kill -0 "$self" 2>/dev/null; do for ((i = 0; i < 200000; i++)); do :; done; done) &
	pids+=($!)
done
echo "== stress: $* with -count=$count -timeout $timeout, $burners busy loops on $(nproc) cores"

start=$(date +%s)
GOTEST_MODULES=. "$here/gotest.sh" "$gotestsum" stress -count="$count" -timeout "$timeout" "$@"
rc=$?
echo "== stress: $(( $(date +%s) - start ))s under load, exit code $rc"
exit "$rc"
