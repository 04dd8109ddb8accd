// Package spec reads build/images/images.yaml, the images `make images`
// builds (hack/imagebuild), for the builder and the tests (test/images).
package spec

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Spec is build/images/images.yaml: the images `make images` builds.
type Spec struct {
	// Registry is the registry part of every tag (upstream: registry.k8s.io).
	Registry string `json:"registry"`
	// Architecture of the images (GOARCH of the binaries).
	Architecture string  `json:"architecture"`
	Bases        []Base  `json:"bases"`
	Images       []Image `json:"images"`
}

// Base is a base of images: the layers under their files.
type Base struct {
	Name string `json:"name"`
	// From is the base under this one's layer ("" = this is the bottom).
	From string `json:"from,omitempty"`
	// DebianLayer names the directory (under -rootfs) where images.sh
	// extracted this base's Debian packages (build/images/debian.lock).
	DebianLayer string `json:"debianLayer"`
	// Include, when set, keeps only these paths (and what is under them) of
	// the extracted packages; Exclude drops paths.
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	// Symlinks adds links: path -> target (what the packages' maintainer
	// scripts would have set up, e.g. update-alternatives).
	Symlinks map[string]string `json:"symlinks,omitempty"`
}

// Image is one image: a base (none = scratch) and a layer of binaries.
type Image struct {
	Name string `json:"name"`
	// Repository in the registry; default: Name.
	Repository string `json:"repository,omitempty"`
	// Component is the build/<component> whose fork version tags the image
	// and whose binaries Files come from.
	Component string `json:"component"`
	Base      string `json:"base,omitempty"`
	Files     []File `json:"files"`
	// Set groups images: "" for the release images of `make images`, "node"
	// for those only the kind node image carries (`make node-image`).
	Set        string   `json:"set,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	User       string   `json:"user,omitempty"`
}

// File is a binary of _output/bin put into an image.
type File struct {
	// From is the binary's path in the binaries directory (_output/bin).
	From string `json:"from"`
	// To is its path in the image, relative to /.
	To string `json:"to"`
	// Capabilities are file capabilities (permitted and effective), as
	// setcap <caps>=+ep, e.g. CAP_NET_BIND_SERVICE.
	Capabilities []string `json:"capabilities,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)

// Load reads and checks a spec file.
func Load(file string) (*Spec, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &s, nil
}

func (s *Spec) validate() error {
	if s.Registry == "" {
		return fmt.Errorf("registry is empty")
	}
	if s.Architecture == "" {
		return fmt.Errorf("architecture is empty")
	}
	bases := map[string]*Base{}
	for i := range s.Bases {
		b := &s.Bases[i]
		if b.Name == "" || bases[b.Name] != nil {
			return fmt.Errorf("bases[%d]: empty or repeated name %q", i, b.Name)
		}
		if b.From != "" && bases[b.From] == nil {
			return fmt.Errorf("base %s: from %q is not a base declared before it", b.Name, b.From)
		}
		if b.DebianLayer == "" {
			return fmt.Errorf("base %s: debianLayer is empty", b.Name)
		}
		for _, p := range append(append([]string{}, b.Include...), b.Exclude...) {
			if err := checkRelative(p); err != nil {
				return fmt.Errorf("base %s: %w", b.Name, err)
			}
		}
		for p := range b.Symlinks {
			if err := checkRelative(p); err != nil {
				return fmt.Errorf("base %s: symlink %w", b.Name, err)
			}
		}
		bases[b.Name] = b
	}
	names := map[string]bool{}
	for i, img := range s.Images {
		if !nameRE.MatchString(img.Name) || names[img.Name] {
			return fmt.Errorf("images[%d]: empty, invalid or repeated name %q", i, img.Name)
		}
		names[img.Name] = true
		if !nameRE.MatchString(img.RepositoryName()) {
			return fmt.Errorf("image %s: invalid repository %q", img.Name, img.RepositoryName())
		}
		if img.Set != "" && img.Set != "node" {
			return fmt.Errorf("image %s: set %q is neither empty nor node", img.Name, img.Set)
		}
		if img.Component == "" {
			return fmt.Errorf("image %s: component is empty", img.Name)
		}
		if img.Base != "" && bases[img.Base] == nil {
			return fmt.Errorf("image %s: unknown base %q", img.Name, img.Base)
		}
		if len(img.Files) == 0 {
			return fmt.Errorf("image %s: no files", img.Name)
		}
		if len(img.Entrypoint) == 0 && len(img.Cmd) == 0 {
			return fmt.Errorf("image %s: neither entrypoint nor cmd", img.Name)
		}
		for _, f := range img.Files {
			if err := checkRelative(f.From); err != nil {
				return fmt.Errorf("image %s: file from: %w", img.Name, err)
			}
			if err := checkRelative(f.To); err != nil {
				return fmt.Errorf("image %s: file %w", img.Name, err)
			}
			for _, c := range f.Capabilities {
				if _, ok := CapabilityBits[c]; !ok {
					return fmt.Errorf("image %s: file %s: unknown capability %q", img.Name, f.To, c)
				}
			}
		}
	}
	return nil
}

func checkRelative(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "..") {
		return fmt.Errorf("path %q is not a clean path relative to /", p)
	}
	return nil
}

// InSet returns the images of set ("" for the release images).
func (s *Spec) InSet(set string) []Image {
	var out []Image
	for _, img := range s.Images {
		if img.Set == set {
			out = append(out, img)
		}
	}
	return out
}

// OfComponents returns the images of s whose component is one of names.
func (s *Spec) OfComponents(names []string) []Image {
	var out []Image
	for _, img := range s.Images {
		if slices.Contains(names, img.Component) {
			out = append(out, img)
		}
	}
	return out
}

// RepositoryName is the image's repository in the registry.
func (i Image) RepositoryName() string {
	if i.Repository != "" {
		return i.Repository
	}
	return i.Name
}

// BaseNamed returns the named base, or nil.
func (s *Spec) BaseNamed(name string) *Base {
	for i := range s.Bases {
		if s.Bases[i].Name == name {
			return &s.Bases[i]
		}
	}
	return nil
}

// CapabilityBits are the file capabilities a spec may name
// (linux/capability.h).
var CapabilityBits = map[string]uint{
	"CAP_NET_BIND_SERVICE": 10,
	"CAP_NET_ADMIN":        12,
	"CAP_NET_RAW":          13,
	"CAP_SYS_ADMIN":        21,
}
