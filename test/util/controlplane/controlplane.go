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
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// RepoRoot returns the root of this repository.
func RepoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("finding the repository root: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// BinDir returns _output/bin of this repository.
func BinDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(RepoRoot(t), "_output", "bin")
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

// LineBinDir returns where `make build LINE=<line>` puts the binaries of a
// release line that is not the newest: _output/bin/<line>
// (hack/lib/init.sh, line::bin).
func LineBinDir(t testing.TB, line string) string {
	t.Helper()
	return filepath.Join(BinDir(t), line)
}

// PristineBinDir returns _output/bin/pristine of this repository: upstream's
// binaries without our patches (hack/make-rules/build-pristine.sh).
func PristineBinDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(BinDir(t), "pristine")
}

// start runs bin with args, logging to dir/name.log; the returned function
// stops it (SIGINT, SIGKILL 20 s later) and is also called at cleanup.
func start(t testing.TB, dir, name, bin string, args ...string) func() {
	t.Helper()
	stop, _ := startProcess(t, dir, name, bin, args...)
	return stop
}

// startProcess is start, also returning the process ID.
func startProcess(t testing.TB, dir, name, bin string, args ...string) (func(), int) {
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
	var once sync.Once
	stop := func() {
		once.Do(func() {
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
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("--- %s log (last 4 KiB) ---\n%s", name, tail(b, 4096))
				// KUBE_GUARD_TEST_LOGS=<dir> keeps whole logs of failed tests.
				if keep := os.Getenv("KUBE_GUARD_TEST_LOGS"); keep != "" {
					if err := os.MkdirAll(keep, 0o755); err == nil {
						_ = os.WriteFile(filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_")+"-"+filepath.Base(dir)+"-"+name+".log"), b, 0o644)
					}
				}
			}
		}
	})
	return stop, cmd.Process.Pid
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
	url, _ := etcd(t)
	return url
}

// etcd is Etcd, also returning the process ID.
func etcd(t testing.TB) (string, int) {
	t.Helper()
	dir := t.TempDir()
	client := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	_, pid := startProcess(t, dir, "etcd", filepath.Join(BinDir(t), "etcd"),
		"--data-dir", filepath.Join(dir, "data"), "--name", "test",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--log-level", "warn")
	return client, pid
}

// APIServer is a running kube-apiserver.
type APIServer struct {
	Config    *rest.Config
	Client    kubernetes.Interface
	EtcdURL   string
	EtcdRoot  string
	Binary    string
	ExtraArgs []string
	// PID is the process ID of the kube-apiserver; EtcdPID that of the etcd
	// StartAPIServer started (0 with Options.EtcdURL).
	PID, EtcdPID int
	stop         func()
}

// Stop stops the kube-apiserver (etcd keeps running), e.g. to start another
// one on the same data. It is also done at cleanup.
func (s *APIServer) Stop() { s.stop() }

// Options configure StartAPIServer.
type Options struct {
	// FeatureGates is passed as --feature-gates when not empty.
	FeatureGates string
	// EtcdURL reuses a running etcd (e.g. to restart the apiserver on the same data).
	EtcdURL string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// Binary is the kube-apiserver to run; default: the patched one in BinDir.
	Binary string
	// Users get a bearer token each (besides the system:masters admin), for
	// APIServer.ConfigFor: e.g. system:kube-scheduler, bound by the bootstrap
	// RBAC policy to its own roles.
	Users []string
}

// userToken is the bearer token StartAPIServer gives a user of Options.Users.
func userToken(user string) string {
	return "token-" + strings.NewReplacer(":", "-", "/", "-").Replace(user)
}

// ConfigFor returns a client config that authenticates as user, one of the
// Options.Users the server was started with.
func (s *APIServer) ConfigFor(user string) *rest.Config {
	cfg := rest.CopyConfig(s.Config)
	cfg.BearerToken = userToken(user)
	return cfg
}

// StartAPIServer starts the patched kube-apiserver against a real etcd, with
// Priority admission on and a token for a system:masters user, and waits
// until /readyz answers ok.
func StartAPIServer(t testing.TB, opts Options) *APIServer {
	t.Helper()
	dir := t.TempDir()
	etcdURL, etcdPID := opts.EtcdURL, 0
	if etcdURL == "" {
		etcdURL, etcdPID = etcd(t)
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
	tokens := token + `,admin,admin-uid,"system:masters"` + "\n"
	for _, user := range opts.Users {
		tokens += fmt.Sprintf("%s,%s,%s-uid\n", userToken(user), user, user)
	}
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
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
	bin := opts.Binary
	if bin == "" {
		bin = filepath.Join(BinDir(t), "kube-apiserver")
	}
	stop, pid := startProcess(t, dir, "kube-apiserver", bin, args...)

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
	return &APIServer{Config: cfg, Client: client, EtcdURL: etcdURL, EtcdRoot: "/registry", Binary: bin, ExtraArgs: args, PID: pid, EtcdPID: etcdPID, stop: stop}
}

// WriteKubeconfig writes cfg (bearer token, server certificate not checked)
// as a kubeconfig file in dir and returns its path.
func WriteKubeconfig(t testing.TB, dir, name string, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(dir, name+".kubeconfig")
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: user
  user: {token: %q}
contexts:
- name: local
  context: {cluster: local, user: user}
current-context: local
`, cfg.Host, cfg.BearerToken)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartScheduler starts the patched kube-scheduler against s as user (one of
// the server's Options.Users), without leader election or serving, with
// --feature-gates=featureGates when not empty. The returned function stops it.
func StartScheduler(t testing.TB, s *APIServer, user, featureGates string, extraArgs ...string) func() {
	t.Helper()
	return StartSchedulerBinary(t, filepath.Join(BinDir(t), "kube-scheduler"), s, user, featureGates, extraArgs...)
}

// StartSchedulerBinary is StartScheduler with the kube-scheduler binary bin
// (e.g. the pristine one in PristineBinDir).
func StartSchedulerBinary(t testing.TB, bin string, s *APIServer, user, featureGates string, extraArgs ...string) func() {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := WriteKubeconfig(t, dir, "kube-scheduler", s.ConfigFor(user))
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0", "-v=2"}
	if featureGates != "" {
		args = append(args, "--feature-gates="+featureGates)
	}
	return start(t, dir, "kube-scheduler", bin, append(args, extraArgs...)...)
}

// StartControllerManager starts the patched kube-controller-manager against s
// as the admin, running only controllers (e.g. "disruption"), without leader
// election or serving. The returned function stops it.
func StartControllerManager(t testing.TB, s *APIServer, controllers, featureGates string) func() {
	t.Helper()
	return StartControllerManagerBinary(t, filepath.Join(BinDir(t), "kube-controller-manager"), s, controllers, featureGates)
}

// StartControllerManagerBinary is StartControllerManager with the
// kube-controller-manager binary bin (e.g. the pristine one in
// PristineBinDir) and extraArgs appended (a later flag wins).
func StartControllerManagerBinary(t testing.TB, bin string, s *APIServer, controllers, featureGates string, extraArgs ...string) func() {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := WriteKubeconfig(t, dir, "kube-controller-manager", s.Config)
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0", "--controllers=" + controllers}
	if featureGates != "" {
		args = append(args, "--feature-gates="+featureGates)
	}
	return start(t, dir, "kube-controller-manager", bin, append(args, extraArgs...)...)
}

// ServingArgs are the flags that make kube-scheduler or
// kube-controller-manager serve on a free port of 127.0.0.1, returned with
// it, and answer /metrics to anyone (no authentication or authorization
// kubeconfig: the server's own self-signed certificate).
func ServingArgs(t testing.TB) ([]string, int) {
	t.Helper()
	port := FreePort(t)
	return []string{
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + t.TempDir(),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
	}, port
}
