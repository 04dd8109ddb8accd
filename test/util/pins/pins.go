// Package pins reads what this repository pins, from the one place each pin
// is written, so that no test repeats a version:
//   - a component's upstream release: build/<component>/component.env, read
//     the way the scripts read it (sourced by bash, so that derived values
//     such as STAGING_VERSION come out as the scripts see them);
//   - a tool's version: the require line of hack/tools/<tool>/go.mod.
package pins

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Component is one component's pin.
type Component struct {
	Name           string
	Module         string // UPSTREAM_MODULE
	Version        string // UPSTREAM_VERSION
	StagingVersion string // STAGING_VERSION, empty when it has no staging modules
	ForkName       string // FORK_NAME
}

// BaseTag is the tag of the pinned base commit in the materialised tree.
func (c Component) BaseTag() string { return "base/" + c.Version }

// UpstreamTag is the tag of the untouched upstream import.
func (c Component) UpstreamTag() string { return "upstream/" + c.Version }

// Load reads build/<name>/component.env of the repository at root.
func Load(root, name string) (Component, error) {
	env := filepath.Join(root, "build", name, "component.env")
	script := `set -o errexit -o nounset; source "$1"; printf '%s\n' "${UPSTREAM_MODULE:-}" "${UPSTREAM_VERSION:-}" "${STAGING_VERSION:-}" "${FORK_NAME:-}"`
	out, err := exec.Command("bash", "-c", script, "bash", env).Output()
	if err != nil {
		return Component{}, fmt.Errorf("reading %s: %w", env, err)
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(f) != 4 || f[0] == "" || f[1] == "" {
		return Component{}, fmt.Errorf("%s sets no UPSTREAM_MODULE or UPSTREAM_VERSION", env)
	}
	return Component{Name: name, Module: f[0], Version: f[1], StagingVersion: f[2], ForkName: f[3]}, nil
}

// Tool is the version at which hack/tools/<tool>/go.mod requires module.
func Tool(root, tool, module string) (string, error) {
	dir := filepath.Join(root, "hack", "tools", tool)
	out, err := exec.Command("go", "mod", "edit", "-json", filepath.Join(dir, "go.mod")).Output()
	if err != nil {
		return "", fmt.Errorf("reading %s/go.mod: %w", dir, err)
	}
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", err
	}
	for _, r := range mod.Require {
		if r.Path == module {
			return r.Version, nil
		}
	}
	return "", fmt.Errorf("%s/go.mod does not require %s", dir, module)
}
