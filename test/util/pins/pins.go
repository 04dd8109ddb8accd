// Package pins reads what this repository pins, from the one place each pin
// is written, so that no test repeats a version:
//   - a component's upstream release on a release line:
//     patches/<component>/<line>/line.env with build/<component>/component.env,
//     read the way the scripts read them (sourced by bash, so that derived
//     values such as STAGING_VERSION come out as the scripts see them);
//   - a tool's version: the require line of hack/tools/<tool>/go.mod.
package pins

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Component is one component's pin on one release line.
type Component struct {
	Name           string
	Line           string // the release line, patches/<Name>/<Line>/
	Module         string // UPSTREAM_MODULE
	Version        string // UPSTREAM_VERSION
	StagingVersion string // STAGING_VERSION, empty when it has no staging modules
	ForkName       string // FORK_NAME
}

// BaseTag is the tag of the pinned base commit in the materialised tree.
func (c Component) BaseTag() string { return "base/" + c.Version }

// UpstreamTag is the tag of the untouched upstream import.
func (c Component) UpstreamTag() string { return "upstream/" + c.Version }

// Load reads the pin of component name on its default release line
// (DefaultLine): the one every target builds unless LINE says otherwise.
func Load(root, name string) (Component, error) {
	line, err := DefaultLine(root, name)
	if err != nil {
		return Component{}, err
	}
	return LoadLine(root, name, line)
}

// DefaultLine returns the newest release line of component name that is not
// a preview (IsPreview), as hack/lib/init.sh's line::default picks it.
func DefaultLine(root, name string) (string, error) {
	lines, err := Lines(root, name)
	if err != nil {
		return "", err
	}
	for i := len(lines) - 1; i >= 0; i-- {
		preview, err := IsPreview(root, name, lines[i])
		if err != nil {
			return "", err
		}
		if !preview {
			return lines[i], nil
		}
	}
	return "", fmt.Errorf("patches/%s has no release line that is not a preview (<line>/line.env without LINE_PREVIEW=true)", name)
}

// IsPreview reports whether release line line is a preview: pinned to an
// upstream pre-release, LINE_PREVIEW=true in its line.env. A line is one for
// every component, so the line.env of any component of that line says it,
// the first (by component name) that sets it, as hack/lib/init.sh's
// line::is_preview reads it (within one file the last setting wins, as when
// bash sources it); name is the component asking, whose line must exist.
func IsPreview(root, name, line string) (bool, error) {
	if _, err := os.Stat(filepath.Join(root, "patches", name, line, "line.env")); err != nil {
		return false, err
	}
	envs, err := filepath.Glob(filepath.Join(root, "patches", "*", line, "line.env"))
	if err != nil {
		return false, err
	}
	sort.Strings(envs)
	for _, env := range envs {
		b, err := os.ReadFile(env)
		if err != nil {
			return false, err
		}
		set, preview := false, false
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "LINE_PREVIEW="); ok {
				set, preview = true, strings.Trim(v, `"'`) == "true"
			}
		}
		if set {
			return preview, nil
		}
	}
	return false, nil
}

// Lines lists the release lines of component name, oldest first.
func Lines(root, name string) ([]string, error) {
	envs, err := filepath.Glob(filepath.Join(root, "patches", name, "*", "line.env"))
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range envs {
		lines = append(lines, filepath.Base(filepath.Dir(e)))
	}
	sort.Slice(lines, func(i, j int) bool {
		a, errA := version.ParseGeneric(lines[i])
		b, errB := version.ParseGeneric(lines[j])
		if errA != nil || errB != nil {
			return lines[i] < lines[j]
		}
		return a.LessThan(b)
	})
	return lines, nil
}

// LoadLine reads the pin of component name on release line line: its
// line.env, then build/<name>/component.env.
func LoadLine(root, name, line string) (Component, error) {
	lineEnv := filepath.Join(root, "patches", name, line, "line.env")
	env := filepath.Join(root, "build", name, "component.env")
	script := `set -o errexit -o nounset; source "$1"; source "$2"; printf '%s\n' "${UPSTREAM_MODULE:-}" "${UPSTREAM_VERSION:-}" "${STAGING_VERSION:-}" "${FORK_NAME:-}"`
	out, err := exec.Command("bash", "-c", script, "bash", lineEnv, env).Output()
	if err != nil {
		return Component{}, fmt.Errorf("reading %s and %s: %w", lineEnv, env, err)
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(f) != 4 || f[0] == "" || f[1] == "" {
		return Component{}, fmt.Errorf("%s and %s set no UPSTREAM_MODULE or UPSTREAM_VERSION", lineEnv, env)
	}
	return Component{Name: name, Line: line, Module: f[0], Version: f[1], StagingVersion: f[2], ForkName: f[3]}, nil
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
