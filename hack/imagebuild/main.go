// Command imagebuild builds and pushes kube-guard's container images without
// a container daemon, with go-containerregistry (`make images`, `make push`):
//
//	imagebuild build -spec build/images/images.yaml -bin _output/bin -rootfs DIR -out _output/images \
//	  -version COMPONENT=FORK_VERSION -epoch COMPONENT=SOURCE_DATE_EPOCH [-commit COMPONENT=SHA]...
//
// builds the images of the spec (base layers from the Debian packages
// hack/make-rules/images.sh extracted under DIR, one layer of binaries) and
// writes docker-loadable archives, an OCI layout, images.txt (tags and
// digests) and upstream's server tarball. Every timestamp is the component's
// SOURCE_DATE_EPOCH and every entry is ordered: the same binaries give the
// same digests.
//
//	imagebuild push -layout _output/images/oci -registry HOST[:PORT][/PATH]
//
// pushes every image of the layout to REGISTRY/<repository>:<tag> and reads
// each back to compare digests.
//
//	imagebuild node -rootfs TAR -overlay DIR -tag TAG -epoch SOURCE_DATE_EPOCH -out FILE [-drop PATH]...
//
// writes the kind node image (hack/make-rules/node-image.sh) as a docker
// archive: the root file system and the overlay in one layer.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: imagebuild build|push|node [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "push":
		err = runPush(os.Args[2:])
	case "node":
		err = runNode(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want build, push or node", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild: %v\n", err)
		os.Exit(1)
	}
}
