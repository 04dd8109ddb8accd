// Package images tests what `make images` and `make push` produce: the
// images of build/images/images.yaml in _output/images (hack/make-rules/test.sh
// runs `make images` before the tests), their contents, that a rebuild gives
// the same digests, and a round trip through a real registry (CNCF
// Distribution, built by hack/make-rules/tools.sh).
package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"kube-guard/hack/imagebuild/spec"
	"kube-guard/test/util/controlplane"
	"kube-guard/test/util/pins"
)

// imagesDir returns _output/images, which `make images` writes.
func imagesDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(controlplane.RepoRoot(t), "_output", "images")
	if _, err := os.Stat(filepath.Join(dir, "images.txt")); err != nil {
		t.Fatalf("%v: run `make images` first (make test does)", err)
	}
	return dir
}

// lineImages is what `make images LINE=<line>` wrote for one release line.
type lineImages struct {
	line string
	dir  string // _output/images, or an older line's _output/images-<line>
	bin  string // _output/bin, or an older line's _output/bin/<line>
	spec *spec.Spec
}

// everyLine returns the images of every release line that has them, newest
// first, each with the release images of the line's components only. The
// newest line's must be there (make test builds them); an older line's are
// there once `make images LINE=<line>` built them.
func everyLine(t testing.TB) []lineImages {
	t.Helper()
	root := controlplane.RepoRoot(t)
	lines, err := pins.Lines(root, "kubernetes")
	require.NoError(t, err)
	def, err := pins.DefaultLine(root, "kubernetes")
	require.NoError(t, err)
	var out []lineImages
	for i := len(lines) - 1; i >= 0; i-- {
		li := lineImages{line: lines[i], dir: imagesDir(t), bin: controlplane.BinDir(t), spec: loadSpec(t)}
		if lines[i] != def {
			li.dir = filepath.Join(root, "_output", "images-"+lines[i])
			li.bin = filepath.Join(controlplane.BinDir(t), lines[i])
			if _, err := os.Stat(filepath.Join(li.dir, "images.txt")); errors.Is(err, fs.ErrNotExist) {
				// make test builds the default line's images only.
				t.Logf("release line %s: no images (`make images LINE=%s` builds them); not checked", lines[i], lines[i])
				continue
			} else if err != nil {
				t.Fatal(err)
			}
		}
		var images []spec.Image
		for _, img := range li.spec.Images {
			has, err := pins.Lines(root, img.Component)
			require.NoError(t, err)
			if slices.Contains(has, lines[i]) {
				images = append(images, img)
			}
		}
		require.NotEmpty(t, images, "line %s has release images", lines[i])
		li.spec.Images = images
		out = append(out, li)
	}
	return out
}

// loadSpec reads build/images/images.yaml with the release images only: the
// node set (pause, etcd, CoreDNS, agnhost) is built by `make node-image`
// into the kind node image, and tested there (`make kind-e2e`).
func loadSpec(t testing.TB) *spec.Spec {
	t.Helper()
	s, err := spec.Load(filepath.Join(controlplane.RepoRoot(t), "build", "images", "images.yaml"))
	require.NoError(t, err)
	s.Images = s.InSet("")
	require.NotEmpty(t, s.Images, "release images in images.yaml")
	return s
}

// digests reads an images.txt: tag -> digest.
func digests(t testing.TB, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		tag, digest, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, "malformed line %q in %s", sc.Text(), file)
		m[tag] = digest
	}
	require.NoError(t, sc.Err())
	return m
}

var forkVersionRE = regexp.MustCompile(`v[0-9]+\.[0-9]+\.[0-9]+-guard\.[0-9]+(-dirty)?`)

// binaryVersion runs `<binary> --version` of _output/bin and returns its
// version: the image tags must carry it.
func binaryVersion(t testing.TB, binary string) string {
	t.Helper()
	return binaryVersionIn(t, controlplane.BinDir(t), binary)
}

// binaryVersionIn is binaryVersion for the binaries in bin.
func binaryVersionIn(t testing.TB, bin, binary string) string {
	t.Helper()
	args := []string{"--version"}
	if binary == "descheduler" {
		args = []string{"version"}
	}
	out, err := exec.Command(filepath.Join(bin, binary), args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", binary, args[0], out)
	if v := forkVersionRE.FindString(string(out)); v != "" {
		return v
	}
	t.Fatalf("%s --version printed no fork version: %s", binary, out)
	return ""
}

func fileSHA256(t testing.TB, file string) string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// layerFiles reads a layer: path -> header, and the SHA-256 of each regular file.
func layerFiles(t testing.TB, l v1.Layer) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	headers, sums := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		p := strings.TrimSuffix(hdr.Name, "/")
		headers[p] = hdr
		if hdr.Typeflag == tar.TypeReg {
			h := sha256.New()
			_, err := io.Copy(h, tr)
			require.NoError(t, err)
			sums[p] = hex.EncodeToString(h.Sum(nil))
		}
	}
	return headers, sums
}

// TestImagesHoldTheBinaries checks every image of the spec in its docker
// archive, under both tags, against the OCI layout and images.txt: its last
// layer holds the binaries of _output/bin byte for byte (the apiserver with
// cap_net_bind_service), the tag carries the binary's fork version, and the
// config is upstream's (entrypoint /go-runner, user, labels).
// Every release line's images are checked, each against its line's binaries.
func TestImagesHoldTheBinaries(t *testing.T) {
	for _, li := range everyLine(t) {
		t.Run(li.line, func(t *testing.T) { imagesHoldTheBinaries(t, li.dir, li.bin, li.spec) })
	}
}

func imagesHoldTheBinaries(t *testing.T, dir, bin string, s *spec.Spec) {
	listed := digests(t, filepath.Join(dir, "images.txt"))
	require.Len(t, listed, len(s.Images), "images.txt lists one tag per image")

	p, err := layout.FromPath(filepath.Join(dir, "oci"))
	require.NoError(t, err)
	index, err := p.ImageIndex()
	require.NoError(t, err)
	im, err := index.IndexManifest()
	require.NoError(t, err)
	inLayout := map[string]string{}
	for _, d := range im.Manifests {
		inLayout[d.Annotations["org.opencontainers.image.ref.name"]] = d.Digest.String()
	}

	for _, img := range s.Images {
		t.Run(img.Name, func(t *testing.T) {
			version := binaryVersionIn(t, bin, img.Files[0].From)
			tag := fmt.Sprintf("%s/%s:%s", s.Registry, img.RepositoryName(), version)
			archTag := fmt.Sprintf("%s/%s-%s:%s", s.Registry, img.RepositoryName(), s.Architecture, version)
			require.Contains(t, listed, tag, "images.txt")
			require.Equal(t, listed[tag], inLayout[tag], "digest in the OCI layout")

			tg, err := name.NewTag(tag)
			require.NoError(t, err)
			image, err := tarball.ImageFromPath(filepath.Join(dir, img.Name+".tar"), &tg)
			require.NoError(t, err, "docker archive %s.tar has %s", img.Name, tag)
			d, err := image.Digest()
			require.NoError(t, err)
			require.Equal(t, listed[tag], d.String(), "digest in the docker archive")
			if img.Component == "kubernetes" {
				// Upstream's release layout: server/bin/<name>.tar tagged
				// <name>-<arch>, and <name>.docker_tag with the version.
				files := serverTarball(t, dir)
				require.Equal(t, version+"\n", string(files["kubernetes/server/bin/"+img.Name+".docker_tag"]))
				archive := filepath.Join(t.TempDir(), img.Name+".tar")
				require.NoError(t, os.WriteFile(archive, files["kubernetes/server/bin/"+img.Name+".tar"], 0o644))
				at, err := name.NewTag(archTag)
				require.NoError(t, err)
				fromServer, err := tarball.ImageFromPath(archive, &at)
				require.NoError(t, err, "server tarball's %s.tar has %s", img.Name, archTag)
				d, err := fromServer.Digest()
				require.NoError(t, err)
				require.Equal(t, listed[tag], d.String(), "digest in the server tarball")
				for _, f := range img.Files {
					require.Equal(t, fileSHA256(t, filepath.Join(bin, f.From)),
						fmt.Sprintf("%x", sha256.Sum256(files["kubernetes/server/bin/"+f.From])), "server/bin/%s", f.From)
				}
			}

			cfg, err := image.ConfigFile()
			require.NoError(t, err)
			require.Equal(t, "linux", cfg.OS)
			require.Equal(t, s.Architecture, cfg.Architecture)
			require.Equal(t, img.Entrypoint, cfg.Config.Entrypoint)
			require.Equal(t, img.Cmd, cfg.Config.Cmd)
			require.Equal(t, img.User, cfg.Config.User)
			require.Equal(t, version, cfg.Config.Labels["org.opencontainers.image.version"])

			layers, err := image.Layers()
			require.NoError(t, err)
			wantLayers := 1
			for b := s.BaseNamed(img.Base); b != nil; b = s.BaseNamed(b.From) {
				wantLayers++
			}
			require.Len(t, layers, wantLayers, "base layers and one of binaries")
			headers, sums := layerFiles(t, layers[len(layers)-1])
			for _, f := range img.Files {
				hdr, ok := headers[f.To]
				require.True(t, ok, "%s in the binaries layer", f.To)
				require.Equal(t, int64(0o755), hdr.Mode&0o7777, "mode of %s", f.To)
				require.Equal(t, fileSHA256(t, filepath.Join(bin, f.From)), sums[f.To], "%s is %s/%s", f.To, bin, f.From)
				xattr, hasCaps := hdr.PAXRecords["SCHILY.xattr.security.capability"]
				require.Equal(t, len(f.Capabilities) > 0, hasCaps, "capabilities of %s", f.To)
				if hasCaps {
					require.Len(t, xattr, 20, "vfs_cap_data revision 2")
					b := []byte(xattr)
					require.Equal(t, uint32(0x02000001), binary.LittleEndian.Uint32(b[0:]), "revision 2, effective")
					for _, c := range f.Capabilities {
						bit := spec.CapabilityBits[c]
						require.NotZero(t, binary.LittleEndian.Uint32(b[4+8*(bit/32):])&(1<<(bit%32)), "%s permitted", c)
					}
				}
			}
		})
	}
}

var serverFiles = map[string]map[string][]byte{}

// serverTarball reads kubernetes-server-linux-amd64.tar.gz (once): path ->
// content.
func serverTarball(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	if files, ok := serverFiles[dir]; ok {
		return files
	}
	f, err := os.Open(filepath.Join(dir, "kubernetes-server-linux-amd64.tar.gz"))
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[hdr.Name] = b
		}
	}
	serverFiles[dir] = files
	return files
}

// extract writes the image's merged filesystem into a new directory.
func extract(t testing.TB, image v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(image)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return root
		}
		require.NoError(t, err)
		p := filepath.Join(root, filepath.FromSlash(hdr.Name))
		require.True(t, strings.HasPrefix(p, root+string(filepath.Separator)), "entry %q escapes the root", hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeSymlink:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.Symlink(hdr.Linkname, p))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode&0o777)|0o200)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, f.Close())
			require.NoError(t, err)
		}
	}
}

// TestKubeProxyBaseRunsItsTools runs, from kube-proxy's image, the tools
// kube-proxy calls (iptables and ip6tables in the nft variant, nft,
// conntrack, ipset) with the image's own dynamic loader and libraries: the
// Debian layer is complete. It also checks the static base every image but
// the descheduler has: users, certificates, time zones.
func TestKubeProxyBaseRunsItsTools(t *testing.T) {
	dir := imagesDir(t)
	version := binaryVersion(t, "kube-proxy")
	tg, err := name.NewTag("registry.k8s.io/kube-proxy:" + version)
	require.NoError(t, err)
	image, err := tarball.ImageFromPath(filepath.Join(dir, "kube-proxy.tar"), &tg)
	require.NoError(t, err)
	root := extract(t, image)

	loader := filepath.Join(root, "lib64", "ld-linux-x86-64.so.2")
	libs := filepath.Join(root, "lib", "x86_64-linux-gnu") + ":" + filepath.Join(root, "usr", "lib", "x86_64-linux-gnu")
	run := func(tool string, want string, args ...string) {
		t.Helper()
		target, err := filepath.EvalSymlinks(filepath.Join(root, tool))
		require.NoError(t, err, "%s in the image", tool)
		require.True(t, strings.HasPrefix(target, root), "%s resolves inside the image", tool)
		// argv[0] is the tool's name: xtables-nft-multi dispatches on it.
		cmd := exec.Command(loader, append([]string{"--library-path", libs, "--argv0", filepath.Base(tool), target}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", tool, out)
		require.Contains(t, string(out), want, tool)
	}
	run("usr/sbin/iptables", "nf_tables", "--version")
	run("usr/sbin/ip6tables", "nf_tables", "--version")
	run("usr/sbin/iptables-restore", "nf_tables", "--version")
	run("usr/sbin/nft", "nftables", "--version")
	run("usr/sbin/conntrack", "conntrack", "--version")
	run("usr/sbin/ipset", "ipset", "--version")
	run("usr/local/bin/kube-proxy", version, "--version")

	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	require.NoError(t, err)
	require.Contains(t, string(passwd), "nonroot:x:65532:65532:")
	st, err := os.Stat(filepath.Join(root, "usr", "share", "zoneinfo", "Europe", "Paris"))
	require.NoError(t, err, "time zones")
	require.NotZero(t, st.Size())
	bundle, err := os.ReadFile(filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt"))
	require.NoError(t, err)
	certs := 0
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		_, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		certs++
	}
	require.Greater(t, certs, 100, "Debian's CA certificates in the bundle")
	_, err = os.Stat(filepath.Join(root, "usr", "share", "doc"))
	require.True(t, os.IsNotExist(err), "documentation left out of the Debian layer")
}

// TestImagesAreReproducible builds the images again from the same binaries
// into a new directory: every digest is the same.
func TestImagesAreReproducible(t *testing.T) {
	dir := imagesDir(t)
	out := filepath.Join(t.TempDir(), "images")
	cmd := exec.Command(filepath.Join(controlplane.RepoRoot(t), "hack", "make-rules", "images.sh"))
	cmd.Env = append(os.Environ(), "SKIP_BUILD=1", "IMAGES_OUT="+out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.Equal(t, digests(t, filepath.Join(dir, "images.txt")), digests(t, filepath.Join(out, "images.txt")))
	require.Equal(t, fileSHA256(t, filepath.Join(dir, "kubernetes-server-linux-amd64.tar.gz")),
		fileSHA256(t, filepath.Join(out, "kubernetes-server-linux-amd64.tar.gz")), "server tarball")
}

// startRegistry runs the registry of _output/bin on 127.0.0.1 with storage
// in a temporary directory and returns its address once it answers.
func startRegistry(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", controlplane.FreePort(t))
	config := filepath.Join(dir, "config.yml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
`, filepath.Join(dir, "storage"), addr)), 0o644))
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(controlplane.BinDir(t), "registry"), "serve", config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start(), "run `make build` (hack/make-rules/tools.sh registry)")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("registry log:\n%s", b)
		}
		logFile.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("registry exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "waiting for the registry on %s", addr)
	return addr
}

// push runs `make push`'s script with REGISTRY=registry.
func push(t *testing.T, registry string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(controlplane.RepoRoot(t), "hack", "make-rules", "push.sh"))
	cmd.Env = append(os.Environ(), "REGISTRY="+registry)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPushRoundTrip pushes the images to a real registry (CNCF Distribution)
// on 127.0.0.1 with `make push`, pulls each back and compares digests, of
// the manifest and of every layer, with the local images.
func TestPushRoundTrip(t *testing.T) {
	dir := imagesDir(t)
	addr := startRegistry(t)
	registry := addr + "/kube-guard"
	out, err := push(t, registry)
	require.NoError(t, err, out)

	listed := digests(t, filepath.Join(dir, "images.txt"))
	p, err := layout.FromPath(filepath.Join(dir, "oci"))
	require.NoError(t, err)
	index, err := p.ImageIndex()
	require.NoError(t, err)
	for local, digest := range listed {
		tg, err := name.NewTag(local)
		require.NoError(t, err)
		ref, err := name.NewTag(registry + "/" + tg.RepositoryStr() + ":" + tg.TagStr())
		require.NoError(t, err)
		require.Contains(t, out, ref.String()+"@"+digest, "make push reports %s", ref)

		pulled, err := remote.Image(ref)
		require.NoError(t, err, "pulling %s", ref)
		d, err := pulled.Digest()
		require.NoError(t, err)
		require.Equal(t, digest, d.String(), "digest of %s pulled back", ref)
		h, err := v1.NewHash(digest)
		require.NoError(t, err)
		mine, err := index.Image(h)
		require.NoError(t, err)
		want, err := mine.Layers()
		require.NoError(t, err)
		got, err := pulled.Layers()
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for i := range want {
			wd, err := want[i].Digest()
			require.NoError(t, err)
			// Reading the blob checks its content against its digest.
			rc, err := got[i].Compressed()
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, rc)
			require.NoError(t, err, "layer %d of %s", i, ref)
			require.NoError(t, rc.Close())
			gd, err := got[i].Digest()
			require.NoError(t, err)
			require.Equal(t, wd, gd, "layer %d of %s", i, ref)
		}
	}

	// A second push has nothing to upload and reports the same digests.
	again, err := push(t, registry)
	require.NoError(t, err, again)
	for local, digest := range listed {
		tg, err := name.NewTag(local)
		require.NoError(t, err)
		require.Contains(t, again, registry+"/"+tg.RepositoryStr()+":"+tg.TagStr()+"@"+digest)
	}
}

// TestPushBadInput: no registry, a registry with a scheme, a port where
// nothing listens: each a clear error.
func TestPushBadInput(t *testing.T) {
	imagesDir(t)
	for _, tc := range []struct{ registry, want string }{
		{"", "REGISTRY is not set"},
		{"http://127.0.0.1:5000", "without a scheme"},
		{fmt.Sprintf("127.0.0.1:%d/x", controlplane.FreePort(t)), "connection refused"},
	} {
		out, err := push(t, tc.registry)
		require.Error(t, err, "push to %q: %s", tc.registry, out)
		require.Contains(t, out, tc.want, "push to %q", tc.registry)
	}
}
