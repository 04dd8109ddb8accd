package pins

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDefaultLineIsTheNewestThatIsNotAPreview: a line pinned to a
// pre-release (LINE_PREVIEW=true) is listed but never the default, and Load
// reads the default line, as hack/lib/init.sh's line::default picks it.
func TestDefaultLineIsTheNewestThatIsNotAPreview(t *testing.T) {
	root := t.TempDir()
	write := fileWriter(t, root)
	write("build/kubernetes/component.env", "UPSTREAM_MODULE=k8s.io/kubernetes\nFORK_NAME=guard\n")
	write("patches/kubernetes/1.80/line.env", "UPSTREAM_VERSION=v1.80.3\n")
	write("patches/kubernetes/1.81/line.env", "UPSTREAM_VERSION=v1.81.2\nLINE_PREVIEW=false\n")
	// A comment is not a setting; the last setting wins.
	write("patches/kubernetes/1.82/line.env", "# LINE_PREVIEW=false\nUPSTREAM_VERSION=v1.82.0-beta.0\nLINE_PREVIEW=false\nLINE_PREVIEW=true\n")

	lines, err := Lines(root, "kubernetes")
	require.NoError(t, err)
	require.Equal(t, []string{"1.80", "1.81", "1.82"}, lines)
	def, err := DefaultLine(root, "kubernetes")
	require.NoError(t, err)
	require.Equal(t, "1.81", def)
	c, err := Load(root, "kubernetes")
	require.NoError(t, err)
	require.Equal(t, "v1.81.2", c.Version)

	write("patches/kubernetes/1.81/line.env", "UPSTREAM_VERSION=v1.81.0-rc.1\nLINE_PREVIEW=true\n")
	def, err = DefaultLine(root, "kubernetes")
	require.NoError(t, err)
	require.Equal(t, "1.80", def, "the newest line that is not a preview")

	write("patches/kubernetes/1.80/line.env", "UPSTREAM_VERSION=v1.80.0-beta.0\nLINE_PREVIEW=true\n")
	_, err = DefaultLine(root, "kubernetes")
	require.ErrorContains(t, err, "no release line that is not a preview")
}

// TestAPreviewLineIsOneForEveryComponent: the descheduler's line 1.82 is a
// preview because the kubernetes line.env of 1.82 says so (the descheduler's
// own line.env pins only its release), as hack/lib/init.sh reads it, so the
// descheduler's default line is 1.81. Failed before: IsPreview read only the
// component's own line.env, the descheduler's default line was the preview,
// and the pipeline tests made a scratch repository of descheduler 1.38 with
// kubernetes 1.37.
func TestAPreviewLineIsOneForEveryComponent(t *testing.T) {
	root := t.TempDir()
	write := fileWriter(t, root)
	write("patches/kubernetes/1.81/line.env", "UPSTREAM_VERSION=v1.81.2\n")
	write("patches/kubernetes/1.82/line.env", "UPSTREAM_VERSION=v1.82.0-beta.0\nLINE_PREVIEW=true\n")
	write("patches/descheduler/1.81/line.env", "UPSTREAM_VERSION=v0.80.0\n")
	write("patches/descheduler/1.82/line.env", "UPSTREAM_VERSION=v0.80.0\n")

	preview, err := IsPreview(root, "descheduler", "1.82")
	require.NoError(t, err)
	require.True(t, preview, "the kubernetes line.env of the line says it is a preview")
	def, err := DefaultLine(root, "descheduler")
	require.NoError(t, err)
	require.Equal(t, "1.81", def)

	_, err = IsPreview(root, "descheduler", "1.83")
	require.Error(t, err, "a line the component does not have")
}

// fileWriter returns a function that writes content to path under root,
// making its folders.
func fileWriter(t *testing.T, root string) func(path, content string) {
	return func(path, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, path), []byte(content), 0o644))
	}
}
