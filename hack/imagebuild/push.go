package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// refNameAnnotation carries an image's tag in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// appendTagged appends img to the layout with its tag in refNameAnnotation,
// which push reads.
func appendTagged(p layout.Path, img v1.Image, tag name.Tag) error {
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.String()}))
}

func runPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "_output/images/oci", "OCI layout written by imagebuild build")
	registry := fs.String("registry", "", "HOST[:PORT][/PATH] to push to")
	timeout := fs.Duration("timeout", 10*time.Minute, "limit for the whole push")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	pushed, err := push(ctx, *dir, *registry)
	for _, p := range pushed {
		fmt.Println(p)
	}
	return err
}

// targetRepository checks REGISTRY and returns REGISTRY/<repository>.
func targetRepository(registry, repository string) (name.Repository, error) {
	registry = strings.TrimSuffix(registry, "/")
	if registry == "" {
		return name.Repository{}, fmt.Errorf("no registry given: set REGISTRY=HOST[:PORT][/PATH]")
	}
	if strings.Contains(registry, "://") {
		return name.Repository{}, fmt.Errorf("registry %q: give HOST[:PORT][/PATH], without a scheme", registry)
	}
	r, err := name.NewRepository(registry+"/"+repository, name.StrictValidation)
	if err != nil {
		return name.Repository{}, fmt.Errorf("registry %q: %w", registry, err)
	}
	return r, nil
}

// push pushes every tagged image of the layout at dir to registry, then
// reads each manifest back and compares its digest with the local one. It
// returns "<ref>@<digest>" of each image pushed.
func push(ctx context.Context, dir, registry string) ([]string, error) {
	if _, err := targetRepository(registry, "x"); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI layout (run make images): %w", dir, err)
	}
	index, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(manifest.Manifests) == 0 {
		return nil, fmt.Errorf("%s holds no image (run make images)", dir)
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("kube-guard-imagebuild"),
	}
	var pushed []string
	for _, desc := range manifest.Manifests {
		ref := desc.Annotations[refNameAnnotation]
		if ref == "" {
			return pushed, fmt.Errorf("%s: manifest %s has no %s annotation", dir, desc.Digest, refNameAnnotation)
		}
		// Docker-style names too (the node image's kube-guard/node:<version>):
		// only the repository path and the tag are used.
		local, err := name.NewTag(ref, name.WeakValidation)
		if err != nil {
			return pushed, fmt.Errorf("%s: %w", dir, err)
		}
		repo, err := targetRepository(registry, local.RepositoryStr())
		if err != nil {
			return pushed, err
		}
		target := repo.Tag(local.TagStr())
		img, err := index.Image(desc.Digest)
		if err != nil {
			return pushed, err
		}
		if err := remote.Write(target, img, opts...); err != nil {
			return pushed, fmt.Errorf("pushing %s: %w", target, err)
		}
		got, err := remote.Head(target, opts...)
		if err != nil {
			return pushed, fmt.Errorf("reading %s back: %w", target, err)
		}
		if got.Digest != desc.Digest {
			return pushed, fmt.Errorf("%s: the registry has %s, the layout %s", target, got.Digest, desc.Digest)
		}
		pushed = append(pushed, fmt.Sprintf("%s@%s", target, desc.Digest))
	}
	return pushed, nil
}
