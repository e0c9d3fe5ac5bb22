#!/usr/bin/env bash
# Builds the control-plane binaries that tests, the benchmark and the dev
# environment run, from the Go modules pinned in hack/tools/go.mod, into the
# given directory. Nothing is downloaded from anywhere but the Go module proxy.
# Idempotent: when every binary is present and was built at the pinned
# versions, nothing is rebuilt.
set -euo pipefail

bin=${1:?usage: testbin.sh BIN_DIR K8S_VERSION ETCD_VERSION KWOK_VERSION}
k8s=${2:?}; etcd=${3:?}; kwok=${4:?}
here=$(cd "$(dirname "$0")" && pwd)
stamp="$bin/.testbin-versions"
want="kubernetes=$k8s etcd=$etcd kwok=$kwok go=$(go env GOVERSION)"
binaries=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok)

missing=0
for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || missing=1; done
if [ "$missing" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi

# The pinned versions must be the ones the tools module resolves; a mismatch
# means someone bumped one place and not the other.
cd "$here/tools"
for pair in "k8s.io/kubernetes $k8s" "go.etcd.io/etcd/server/v3 $etcd" "sigs.k8s.io/kwok $kwok"; do
	set -- $pair
	have=$(go list -m -f '{{.Version}}' "$1")
	if [ "$have" != "$2" ]; then
		echo "hack/tools/go.mod has $1 $have, the Makefile pins $2" >&2
		exit 1
	fi
done

mkdir -p "$bin"
echo "Building test control-plane binaries into $bin ($want)."
echo "The first build takes several minutes; later runs reuse them."
start=$(date +%s)
go build -o "$bin/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	sigs.k8s.io/kwok/cmd/kwok \
	./etcd
echo "$want" >"$stamp"
echo "Built ${binaries[*]} in $(( $(date +%s) - start ))s."
