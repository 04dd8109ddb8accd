package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestDerive(t *testing.T) {
	up := `
run:
  timeout: 30m
version: "2"
issues:
  max-issues-per-linter: 0
linters:
  default: none
  enable: [govet, kubeapilinter, logcheck]
  exclusions:
    rules:
      - linters: [kubeapilinter]
        path-except: staging/src/k8s.io/api/.*
  settings:
    custom:
      logcheck:
        path: _output/local/bin/logcheck.so
      kubeapilinter:
        path: _output/local/bin/kube-api-linter.so
        description: kube-api-linter
        settings:
          linters:
            enable: [jsontags]
`
	f := filepath.Join(t.TempDir(), "golangci.yaml")
	require.NoError(t, os.WriteFile(f, []byte(up), 0o644))
	out, err := derive(f)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(out, &cfg))
	linters := cfg["linters"].(map[string]any)
	require.Equal(t, []any{"kubeapilinter"}, linters["enable"], "only the kube-api-linter")
	kal := linters["settings"].(map[string]any)["custom"].(map[string]any)["kubeapilinter"].(map[string]any)
	require.Equal(t, "module", kal["type"], "built into the standalone binary, no plugin path")
	require.NotContains(t, kal, "path")
	require.Equal(t, map[string]any{"linters": map[string]any{"enable": []any{"jsontags"}}}, kal["settings"], "upstream's settings")
	require.Equal(t, "staging/src/k8s.io/api/.*", linters["exclusions"].(map[string]any)["rules"].([]any)[0].(map[string]any)["path-except"])
	require.Equal(t, map[string]any{"timeout": "30m"}, cfg["run"])

	require.NoError(t, os.WriteFile(f, []byte("linters: {}\n"), 0o644))
	_, err = derive(f)
	require.ErrorContains(t, err, "no linters.settings.custom.kubeapilinter")
}
