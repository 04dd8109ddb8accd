// Package controlplane starts the etcd and kube-apiserver binaries that
// `make build` leaves in _output/bin as real processes on 127.0.0.1, for this
// repository's integration tests.
package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// BinDir returns _output/bin of this repository.
func BinDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("finding the repository root: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "_output", "bin")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs bin with args, logging to dir/name.log, and stops it at cleanup.
func start(t testing.TB, dir, name, bin string, args ...string) *exec.Cmd {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `make build` first)", bin, err)
	}
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("--- %s log (last 4 KiB) ---\n%s", name, tail(b, 4096))
			}
		}
	})
	return cmd
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Etcd starts the project's etcd with a temporary data directory and returns its client URL.
func Etcd(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	client := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	start(t, dir, "etcd", filepath.Join(BinDir(t), "etcd"),
		"--data-dir", filepath.Join(dir, "data"), "--name", "test",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--log-level", "warn")
	return client
}

// APIServer is a running kube-apiserver.
type APIServer struct {
	Config    *rest.Config
	Client    kubernetes.Interface
	EtcdURL   string
	EtcdRoot  string
	Binary    string
	ExtraArgs []string
}

// Options configure StartAPIServer.
type Options struct {
	// FeatureGates is passed as --feature-gates when not empty.
	FeatureGates string
	// EtcdURL reuses a running etcd (e.g. to restart the apiserver on the same data).
	EtcdURL string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
}

// StartAPIServer starts the patched kube-apiserver against a real etcd, with
// Priority admission on and a token for a system:masters user, and waits
// until /readyz answers ok.
func StartAPIServer(t testing.TB, opts Options) *APIServer {
	t.Helper()
	dir := t.TempDir()
	etcdURL := opts.EtcdURL
	if etcdURL == "" {
		etcdURL = Etcd(t)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := "integration-test-admin-token"
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+`,admin,admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	args := []string{
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--etcd-servers=" + etcdURL, "--etcd-prefix=/registry",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + keyFile, "--service-account-signing-key-file=" + keyFile,
		"--token-auth-file=" + tokenFile, "--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=10.0.0.0/24", "--enable-priority-and-fairness=false",
		"--enable-admission-plugins=Priority",
	}
	if opts.FeatureGates != "" {
		args = append(args, "--feature-gates="+opts.FeatureGates)
	}
	args = append(args, opts.ExtraArgs...)
	bin := filepath.Join(BinDir(t), "kube-apiserver")
	start(t, dir, "kube-apiserver", bin, args...)

	cfg := &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             100, Burst: 200,
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last string
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		last = string(body)
		if err != nil {
			last = err.Error()
		}
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		t.Fatalf("kube-apiserver did not become ready: %v (last answer: %s)", err, last)
	}
	return &APIServer{Config: cfg, Client: client, EtcdURL: etcdURL, EtcdRoot: "/registry", Binary: bin, ExtraArgs: args}
}
