// Command etcd runs the upstream etcd server, built from its published Go module
// at the version k8s.io/kubernetes requires (etcd's own module cannot be
// `go install`ed because of its replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
