package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"kube-guard/hack/imagebuild/spec"
)

// component is what images.sh says of a build/<component>: its fork version
// (the tag), the SOURCE_DATE_EPOCH of its tree (every timestamp in its
// images) and its commit (a label).
type component struct {
	version string
	epoch   time.Time
	commit  string
}

// mapFlag is a repeated NAME=VALUE flag.
type mapFlag map[string]string

func (m mapFlag) String() string { return fmt.Sprint(map[string]string(m)) }
func (m mapFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" || val == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	m[k] = val
	return nil
}

// built is one image and its tags.
type built struct {
	spec  spec.Image
	image v1.Image
	// tag is <registry>/<repository>:<version>; archTag the same with
	// -<arch> after the repository (upstream's names in its server tarball).
	tag, archTag name.Tag
}

const staticPasswd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const staticGroup = `root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
`

// baseLayer builds the layer of base b from the Debian packages images.sh
// extracted into rootfs/<debianLayer>.
func baseLayer(b *spec.Base, rootfs string, mtime time.Time) (v1.Layer, error) {
	l := newLayerBuilder(mtime)
	tree := filepath.Join(rootfs, b.DebianLayer)
	if st, err := os.Stat(tree); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("base %s: %s is not a directory of extracted Debian packages (run hack/make-rules/images.sh)", b.Name, tree)
	}
	if err := l.addTree(tree, b.Include, b.Exclude); err != nil {
		return nil, fmt.Errorf("base %s: %w", b.Name, err)
	}
	if b.From == "" {
		// The bottom base: what distroless/static has besides its packages.
		l.file("etc/passwd", 0o644, []byte(staticPasswd))
		l.file("etc/group", 0o644, []byte(staticGroup))
		l.file("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n"))
		l.dir("root", 0o700, 0, 0)
		l.dir("home/nonroot", 0o700, 65532, 65532)
		l.dir("tmp", 0o1777, 0, 0)
		l.dir("var", 0o755, 0, 0)
		bundle, err := caBundle(filepath.Join(tree, "usr/share/ca-certificates"))
		if err != nil {
			return nil, fmt.Errorf("base %s: %w", b.Name, err)
		}
		l.file("etc/ssl/certs/ca-certificates.crt", 0o644, bundle)
	}
	for p, target := range b.Symlinks {
		l.symlink(p, target)
	}
	return l.layer()
}

// caBundle concatenates the certificates under dir in the order
// update-ca-certificates does (sorted paths), as it would write
// /etc/ssl/certs/ca-certificates.crt.
func caBundle(dir string) ([]byte, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".crt") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no certificates under %s", dir)
	}
	sort.Strings(files)
	var b bytes.Buffer
	for _, f := range files {
		c, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		b.Write(c)
		if len(c) > 0 && c[len(c)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	specFile := fs.String("spec", "build/images/images.yaml", "the images spec")
	bin := fs.String("bin", "_output/bin", "directory of the binaries")
	rootfs := fs.String("rootfs", "", "directory with a subdirectory of extracted Debian packages per base")
	out := fs.String("out", "_output/images", "output directory")
	set := fs.String("set", "", `the images of this set ("" = the release images, node = the node image's own)`)
	only := fs.String("components", "", "comma-separated: only the images of these components (default: every component's; a release line without a descheduler has no descheduler image)")
	versions, epochs, commits := mapFlag{}, mapFlag{}, mapFlag{}
	fs.Var(versions, "version", "COMPONENT=FORK_VERSION (repeated)")
	fs.Var(epochs, "epoch", "COMPONENT=SOURCE_DATE_EPOCH (repeated)")
	fs.Var(commits, "commit", "COMPONENT=COMMIT (repeated)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rootfs == "" {
		return fmt.Errorf("-rootfs is required")
	}
	sp, err := spec.Load(*specFile)
	if err != nil {
		return err
	}
	if sp.Images = sp.InSet(*set); len(sp.Images) == 0 {
		return fmt.Errorf("no image of set %q in %s", *set, *specFile)
	}
	if *only != "" {
		if sp.Images = sp.OfComponents(strings.Split(*only, ",")); len(sp.Images) == 0 {
			return fmt.Errorf("no image of set %q and components %s in %s", *set, *only, *specFile)
		}
	}
	comps := map[string]component{}
	for _, img := range sp.Images {
		c := img.Component
		if versions[c] == "" || epochs[c] == "" {
			return fmt.Errorf("image %s: component %s needs -version and -epoch", img.Name, c)
		}
		sec, err := strconv.ParseInt(epochs[c], 10, 64)
		if err != nil {
			return fmt.Errorf("-epoch %s=%s: %w", c, epochs[c], err)
		}
		comps[c] = component{version: versions[c], epoch: time.Unix(sec, 0).UTC(), commit: commits[c]}
	}

	images, err := buildImages(sp, comps, *bin, *rootfs)
	if err != nil {
		return err
	}
	return writeOutputs(sp, images, comps, *bin, *out)
}

// buildImages builds every image of spec.
func buildImages(spec *spec.Spec, comps map[string]component, bin, rootfs string) ([]built, error) {
	// Base layers, built once per (base, timestamp).
	type key struct {
		base  string
		epoch int64
	}
	baseLayers := map[key][]v1.Layer{}
	var layersOf func(base string, mtime time.Time) ([]v1.Layer, error)
	layersOf = func(base string, mtime time.Time) ([]v1.Layer, error) {
		k := key{base, mtime.Unix()}
		if ls, ok := baseLayers[k]; ok {
			return ls, nil
		}
		b := spec.BaseNamed(base)
		var ls []v1.Layer
		if b.From != "" {
			below, err := layersOf(b.From, mtime)
			if err != nil {
				return nil, err
			}
			ls = append(ls, below...)
		}
		l, err := baseLayer(b, rootfs, mtime)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		baseLayers[k] = ls
		return ls, nil
	}

	var out []built
	for _, img := range spec.Images {
		c := comps[img.Component]
		var layers []v1.Layer
		if img.Base != "" {
			ls, err := layersOf(img.Base, c.epoch)
			if err != nil {
				return nil, err
			}
			layers = append(layers, ls...)
		}
		l := newLayerBuilder(c.epoch)
		for _, f := range img.Files {
			var pax map[string]string
			if len(f.Capabilities) > 0 {
				pax = map[string]string{"SCHILY.xattr.security.capability": capabilityXattr(f.Capabilities)}
			}
			if err := l.fileFrom(f.To, filepath.Join(bin, f.From), 0o755, pax); err != nil {
				return nil, fmt.Errorf("image %s: %w (run make build)", img.Name, err)
			}
		}
		binLayer, err := l.layer()
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		layers = append(layers, binLayer)

		cfg := &v1.ConfigFile{
			Architecture: spec.Architecture,
			OS:           "linux",
			Created:      v1.Time{Time: c.epoch},
			Config: v1.Config{
				Entrypoint: img.Entrypoint,
				Cmd:        img.Cmd,
				User:       img.User,
				Env: []string{
					"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				},
				Labels: map[string]string{
					"org.opencontainers.image.title":   img.Name,
					"org.opencontainers.image.version": c.version,
				},
			},
		}
		if img.Base != "" {
			cfg.Config.Env = append(cfg.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
		}
		if c.commit != "" {
			cfg.Config.Labels["org.opencontainers.image.revision"] = c.commit
		}
		image, err := mutate.ConfigFile(empty.Image, cfg)
		if err != nil {
			return nil, err
		}
		if image, err = mutate.AppendLayers(image, layers...); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		tag, err := name.NewTag(fmt.Sprintf("%s/%s:%s", spec.Registry, img.RepositoryName(), c.version), name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		archTag, err := name.NewTag(fmt.Sprintf("%s/%s-%s:%s", spec.Registry, img.RepositoryName(), spec.Architecture, c.version), name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		out = append(out, built{spec: img, image: image, tag: tag, archTag: archTag})
	}
	return out, nil
}

// writeOutputs writes, under out: <image>.tar (docker load, tagged
// <registry>/<repository>:<version>), oci/ (an OCI
// layout of every image, each annotated with its tag), images.txt (tag and
// digest of each image) and kubernetes-server-linux-<arch>.tar.gz (upstream's
// release layout: kubernetes/server/bin/ with the binaries of the kubernetes
// component, its images' archives and .docker_tag files). The directory is
// written beside out and renamed into place: an interrupted build leaves the
// previous output.
func writeOutputs(spec *spec.Spec, images []built, comps map[string]component, bin, out string) error {
	tmp := out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(filepath.Join(tmp, "oci"), empty.Index)
	if err != nil {
		return err
	}
	var list strings.Builder
	for _, b := range images {
		archive := filepath.Join(tmp, b.spec.Name+".tar")
		// One tag per archive: with several, go-containerregistry orders
		// them as a map does, and the archive would differ between builds.
		if err := tarball.WriteToFile(archive, b.tag, b.image); err != nil {
			return fmt.Errorf("image %s: %w", b.spec.Name, err)
		}
		if err := appendTagged(p, b.image, b.tag); err != nil {
			return fmt.Errorf("image %s: %w", b.spec.Name, err)
		}
		d, err := b.image.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(&list, "%s %s\n", b.tag, d)
		fmt.Printf("%s@%s\n", b.tag, d)
	}
	if err := os.WriteFile(filepath.Join(tmp, "images.txt"), []byte(list.String()), 0o644); err != nil {
		return err
	}
	if k, ok := comps["kubernetes"]; ok && spec.Images[0].Set == "" {
		if err := writeServerTarball(spec, images, k, bin, tmp); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// writeServerTarball writes kubernetes-server-linux-<arch>.tar.gz in tmp.
func writeServerTarball(spec *spec.Spec, images []built, k component, bin, tmp string) error {
	file := filepath.Join(tmp, fmt.Sprintf("kubernetes-server-linux-%s.tar.gz", spec.Architecture))
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	l := newLayerBuilder(k.epoch)
	l.file("kubernetes/version", 0o644, []byte(k.version+"\n"))
	seen := map[string]bool{}
	for _, b := range images {
		if b.spec.Component != "kubernetes" {
			continue
		}
		for _, fl := range b.spec.Files {
			if !seen[fl.From] {
				seen[fl.From] = true
				if err := l.fileFrom("kubernetes/server/bin/"+fl.From, filepath.Join(bin, fl.From), 0o755, nil); err != nil {
					return err
				}
			}
		}
		// Upstream's release tarball tags these <registry>/<name>-<arch>:<version>.
		archive := filepath.Join(tmp, "server", b.spec.Name+".tar")
		if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
			return err
		}
		if err := tarball.WriteToFile(archive, b.archTag, b.image); err != nil {
			return fmt.Errorf("image %s: %w", b.spec.Name, err)
		}
		if err := l.fileFrom("kubernetes/server/bin/"+b.spec.Name+".tar", archive, 0o644, nil); err != nil {
			return err
		}
		l.file("kubernetes/server/bin/"+b.spec.Name+".docker_tag", 0o644, []byte(k.version+"\n"))
	}
	// Streamed: the archives are large.
	if err := l.writeTar(gz); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(tmp, "server"))
}
