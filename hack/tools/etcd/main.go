// Command etcd is the etcd server, built from its Go module at the version
// pinned in hack/tools/go.mod, so that no prebuilt binary has to be fetched.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
