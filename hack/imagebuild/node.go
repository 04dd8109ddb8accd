package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// listFlag is a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runNode builds the kind node image: one layer with the root file system
// (-rootfs, a tar such as mmdebstrap writes) and the files of -overlay on
// top (they win), without the paths of the root file system a -drop pattern
// (path.Match) matches, or whose parent it matches; kind's entrypoint and
// systemd as PID 1, as kind's base image.
func runNode(args []string) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	rootfs := fs.String("rootfs", "", "tar of the root file system")
	overlay := fs.String("overlay", "", "directory of files put over it")
	tag := fs.String("tag", "", "the image's tag")
	epoch := fs.String("epoch", "", "SOURCE_DATE_EPOCH of every timestamp")
	out := fs.String("out", "", "docker archive to write")
	layoutDir := fs.String("layout", "", "also write the image into this OCI layout (made anew), annotated with its tag, for imagebuild push")
	var drops listFlag
	fs.Var(&drops, "drop", "path.Match pattern of paths of the root file system to leave out, with what they hold (repeated)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rootfs == "" || *overlay == "" || *tag == "" || *epoch == "" || *out == "" {
		return fmt.Errorf("-rootfs, -overlay, -tag, -epoch and -out are required")
	}
	sec, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("-epoch: %w", err)
	}
	mtime := time.Unix(sec, 0).UTC()
	// A docker-style name ("kube-guard/node:v1"): docker and kind read it as docker.io/....
	ref, err := name.NewTag(*tag, name.WeakValidation)
	if err != nil {
		return err
	}
	for _, d := range drops {
		if _, err := path.Match(d, ""); err != nil {
			return fmt.Errorf("-drop %q: %w", d, err)
		}
	}
	// drop matches a path when a pattern matches it or one of its parents.
	drop := func(p string) bool {
		for a := p; a != "." && a != "/"; a = path.Dir(a) {
			for _, d := range drops {
				if ok, _ := path.Match(d, a); ok {
					return true
				}
			}
		}
		return false
	}

	l := newLayerBuilder(mtime)
	f, err := os.Open(*rootfs)
	if err != nil {
		return err
	}
	err = l.addTar(f, drop)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *rootfs, err)
	}
	if err := l.addTree(*overlay, nil, nil); err != nil {
		return fmt.Errorf("%s: %w", *overlay, err)
	}
	layer, err := l.layer()
	if err != nil {
		return err
	}
	cfg := &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: mtime},
		Config: v1.Config{
			// As kind's base image.
			Entrypoint: []string{"/usr/local/bin/entrypoint", "/sbin/init"},
			Env:        []string{"container=docker", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			StopSignal: "SIGRTMIN+3",
			Labels:     map[string]string{"org.opencontainers.image.title": "kube-guard kind node"},
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return err
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return err
	}
	tmp := *out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := os.RemoveAll(*layoutDir); err != nil {
			return err
		}
		p, err := layout.Write(*layoutDir, empty.Index)
		if err != nil {
			return err
		}
		if err := appendTagged(p, img, ref); err != nil {
			return err
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref, d)
	return os.Rename(tmp, *out)
}
