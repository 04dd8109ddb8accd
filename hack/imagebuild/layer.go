package main

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"kube-guard/hack/imagebuild/spec"
)

// capabilityXattr returns the security.capability extended attribute that
// `setcap <caps>=+ep` writes: struct vfs_cap_data, revision 2, effective.
func capabilityXattr(caps []string) string {
	var permitted [2]uint32
	for _, c := range caps {
		bit := spec.CapabilityBits[c]
		permitted[bit/32] |= 1 << (bit % 32)
	}
	const vfsCapRevision2, vfsCapFlagsEffective = 0x02000000, 0x000001
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], vfsCapRevision2|vfsCapFlagsEffective)
	binary.LittleEndian.PutUint32(b[4:], permitted[0])  // data[0].permitted
	binary.LittleEndian.PutUint32(b[8:], 0)             // data[0].inheritable
	binary.LittleEndian.PutUint32(b[12:], permitted[1]) // data[1].permitted
	binary.LittleEndian.PutUint32(b[16:], 0)            // data[1].inheritable
	return string(b)
}

// entry is one file, directory or link of a layer.
type entry struct {
	hdr tar.Header
	// data is a regular file's content; with src set, it is read from there.
	data []byte
	src  string
}

// layerBuilder collects entries and writes them as a reproducible tar: sorted
// by path, parents first, owned by root unless said otherwise, every time the
// same (the SOURCE_DATE_EPOCH of the component).
type layerBuilder struct {
	mtime   time.Time
	entries map[string]*entry
}

func newLayerBuilder(mtime time.Time) *layerBuilder {
	return &layerBuilder{mtime: mtime, entries: map[string]*entry{}}
}

func (l *layerBuilder) parents(p string) {
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := l.entries[d]; !ok {
			l.dir(d, 0o755, 0, 0)
		}
	}
}

func (l *layerBuilder) dir(p string, mode int64, uid, gid int) {
	l.parents(p)
	l.entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: gid}}
}

func (l *layerBuilder) file(p string, mode int64, data []byte) {
	l.parents(p)
	l.entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data))}, data: data}
}

// fileFrom adds the file src (its content and size are read when the layer
// is written) with mode, and pax records (e.g. extended attributes).
func (l *layerBuilder) fileFrom(p, src string, mode int64, pax map[string]string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	l.parents(p)
	l.entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: st.Size(), PAXRecords: pax}, src: src}
	return nil
}

func (l *layerBuilder) symlink(p, target string) {
	l.parents(p)
	l.entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777}}
}

// addTree adds the files of root (a directory images.sh extracted Debian
// packages into), keeping only paths under include (all when empty) and
// dropping those under exclude. Ownership is root's, as dpkg installs them.
func (l *layerBuilder) addTree(root string, include, exclude []string) error {
	under := func(p string, prefixes []string) bool {
		for _, x := range prefixes {
			if p == x || strings.HasPrefix(p, x+"/") {
				return true
			}
		}
		return false
	}
	return filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, file)
		if err != nil || rel == "." {
			return err
		}
		p := filepath.ToSlash(rel)
		if under(p, exclude) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if len(include) > 0 && !under(p, include) {
			// A directory above an included path is walked, not added: its
			// entry comes from parents().
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := int64(info.Mode().Perm())
		if info.Mode()&fs.ModeSetuid != 0 {
			mode |= 0o4000
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			mode |= 0o2000
		}
		if info.Mode()&fs.ModeSticky != 0 {
			mode |= 0o1000
		}
		uid, gid := 0, 0
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
		switch {
		case d.IsDir():
			l.dir(p, mode, uid, gid)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(file)
			if err != nil {
				return err
			}
			l.symlink(p, target)
		case info.Mode().IsRegular():
			if err := l.fileFrom(p, file, mode, nil); err != nil {
				return err
			}
			l.entries[p].hdr.Uid, l.entries[p].hdr.Gid = uid, gid
		default:
			return fmt.Errorf("%s: unsupported file type %v", file, info.Mode().Type())
		}
		return nil
	})
}

// addTar adds the entries of a tar stream (a root file system, e.g. what
// mmdebstrap writes), with their owners, modes and extended attributes,
// except those drop matches and device nodes, fifos and sockets (a
// container runtime provides /dev). Hard links become copies of their
// target, so that the order of the layer's entries does not matter.
func (l *layerBuilder) addTar(r io.Reader, drop func(string) bool) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if p == "." || p == "/" || drop(p) {
			continue
		}
		h := tar.Header{Name: p, Mode: hdr.Mode, Uid: hdr.Uid, Gid: hdr.Gid, Uname: hdr.Uname, Gname: hdr.Gname, PAXRecords: xattrs(hdr.PAXRecords)}
		switch hdr.Typeflag {
		case tar.TypeDir:
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
			l.parents(p)
			l.entries[p] = &entry{hdr: h}
		case tar.TypeSymlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, hdr.Linkname
			l.parents(p)
			l.entries[p] = &entry{hdr: h}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			l.parents(p)
			l.entries[p] = &entry{hdr: h, data: data}
		case tar.TypeLink:
			target := path.Clean(strings.TrimPrefix(hdr.Linkname, "./"))
			t, ok := l.entries[target]
			if !ok || t.hdr.Typeflag != tar.TypeReg {
				return fmt.Errorf("%s: hard link to %s, which is not a file before it", p, target)
			}
			h.Typeflag, h.Size = tar.TypeReg, t.hdr.Size
			l.parents(p)
			l.entries[p] = &entry{hdr: h, data: t.data}
		default:
			// Devices, fifos, sockets.
		}
	}
}

// xattrs keeps the extended attributes of pax records (file capabilities).
func xattrs(pax map[string]string) map[string]string {
	var out map[string]string
	for k, v := range pax {
		if strings.HasPrefix(k, "SCHILY.xattr.") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// paths returns the layer's paths in the order they are written.
func (l *layerBuilder) paths() []string {
	paths := make([]string, 0, len(l.entries))
	for p := range l.entries {
		paths = append(paths, p)
	}
	// Sorted by path with "/" first, so that a directory precedes what it holds.
	sort.Slice(paths, func(i, j int) bool {
		return strings.ReplaceAll(paths[i], "/", "\x00") < strings.ReplaceAll(paths[j], "/", "\x00")
	})
	return paths
}

// tar returns the layer's uncompressed tar.
func (l *layerBuilder) tar() ([]byte, error) {
	var buf bytes.Buffer
	if err := l.writeTar(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTar writes the entries as a tar to w.
func (l *layerBuilder) writeTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, p := range l.paths() {
		e := l.entries[p]
		hdr := e.hdr
		hdr.ModTime = l.mtime
		hdr.Format = tar.FormatPAX
		if hdr.Uid == 0 && hdr.Uname == "" {
			hdr.Uname = "root"
		}
		if hdr.Gid == 0 && hdr.Gname == "" {
			hdr.Gname = "root"
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		switch {
		case e.src != "":
			f, err := os.Open(e.src)
			if err != nil {
				return err
			}
			n, err := io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", e.src, err)
			}
			if n != hdr.Size {
				return fmt.Errorf("%s changed while it was written", e.src)
			}
		case e.data != nil:
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// layer returns the layer as a gzip-compressed image layer.
func (l *layerBuilder) layer() (v1.Layer, error) {
	b, err := l.tar()
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}
