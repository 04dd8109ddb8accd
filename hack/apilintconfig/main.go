// Command apilintconfig derives, from upstream's golangci-lint configuration
// (hack/golangci.yaml of the materialised kubernetes tree), one that runs only
// the kube-api-linter, as a module of its standalone binary instead of the
// plugin upstream builds from its hack/tools (which the module zip lacks):
// upstream's kubeapilinter settings, its exclusions (the known exceptions of
// existing API types), its run and issues settings, nothing else.
//
// Usage: apilintconfig <tree>/hack/golangci.yaml > config.yaml
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apilintconfig <tree>/hack/golangci.yaml")
		os.Exit(2)
	}
	out, err := derive(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "apilintconfig:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

func derive(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var up map[string]any
	if err := yaml.Unmarshal(data, &up); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	linters, _ := up["linters"].(map[string]any)
	settings, _ := linters["settings"].(map[string]any)
	custom, _ := settings["custom"].(map[string]any)
	kal, ok := custom["kubeapilinter"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: no linters.settings.custom.kubeapilinter", path)
	}
	// The standalone binary has the linter built in as a module plugin.
	kalModule := map[string]any{
		"type":        "module",
		"description": kal["description"],
		"settings":    kal["settings"],
	}
	cfg := map[string]any{
		"version": "2",
		"run":     up["run"],
		"issues":  up["issues"],
		"output":  map[string]any{"formats": map[string]any{"text": map[string]any{"path": "stdout", "print-linter-name": true}}},
		"linters": map[string]any{
			"default":    "none",
			"enable":     []any{"kubeapilinter"},
			"exclusions": linters["exclusions"],
			"settings":   map[string]any{"custom": map[string]any{"kubeapilinter": kalModule}},
		},
	}
	return yaml.Marshal(cfg)
}
