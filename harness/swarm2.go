package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// Swarm2 is the second, independent single-node swarm scripts/swarm2-up
// starts on this machine, and the three ways it can be reached.
type Swarm2 struct {
	// Sock is its Engine's unix socket (unix:///...).
	Sock string
	// TCP is its Engine over mutual TLS (tcp://host:2376), with the
	// client's CA, certificate and key files.
	TCP, TLSCA, TLSCert, TLSKey string
	// SSH reaches it through a local sshd (ssh://user@host:port), with the
	// client key and a known_hosts file holding the sshd's host key.
	SSH, SSHKey, KnownHosts string
	// Addr is where its host-mode published ports answer.
	Addr string
	// ClusterID tells it apart from the main swarm.
	ClusterID string
	// Client talks to it over Sock; closed in t.Cleanup.
	Client *client.Client

	stateDir string
}

// RequireSwarm2 returns the second swarm when scripts/swarm2-up has started
// it and its Engine answers as a manager. Without it the test fails when
// SwarmRequired (CI starts it: `make test` runs swarm2-up) and is skipped
// otherwise, with the reason.
func RequireSwarm2(t testing.TB) *Swarm2 {
	t.Helper()
	s, reason := findSwarm2(t.Context())
	if s == nil {
		if SwarmRequired() {
			t.Fatalf("%s=1 but the second swarm is not there: %s (run scripts/swarm2-up)", EnvRequireSwarm, reason)
		}
		t.Skipf("no second swarm: %s (run scripts/swarm2-up; set %s=1 to make this a failure)", reason, EnvRequireSwarm)
	}
	t.Cleanup(func() { _ = s.Client.Close() })
	return s
}

// swarm2StateDir is where scripts/swarm2-up keeps its state and env file.
func swarm2StateDir() string {
	if d := os.Getenv("SKEP_SWARM2_STATE_DIR"); d != "" {
		return d
	}
	return "/tmp/skep-swarm2"
}

// findSwarm2 reads the env file swarm2-up wrote and checks the Engine it
// names; it returns nil and why when either is missing.
func findSwarm2(ctx context.Context) (*Swarm2, string) {
	dir := swarm2StateDir()
	vars, err := readEnvFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, err.Error()
	}
	s := &Swarm2{stateDir: dir,
		Sock: vars["SKEP_SWARM2_SOCK"], TCP: vars["SKEP_SWARM2_TCP"],
		TLSCA: vars["SKEP_SWARM2_TLS_CA"], TLSCert: vars["SKEP_SWARM2_TLS_CERT"], TLSKey: vars["SKEP_SWARM2_TLS_KEY"],
		SSH: vars["SKEP_SWARM2_SSH"], SSHKey: vars["SKEP_SWARM2_SSH_KEY"], KnownHosts: vars["SKEP_SWARM2_KNOWN_HOSTS"],
		Addr: vars["SKEP_SWARM2_ADDR"], ClusterID: vars["SKEP_SWARM2_CLUSTER_ID"]}
	if s.Sock == "" || s.TCP == "" || s.SSH == "" {
		return nil, "env file " + filepath.Join(dir, "env") + " lacks the socket, TCP or ssh address"
	}
	cli, err := client.NewClientWithOpts(client.WithHost(s.Sock), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err.Error()
	}
	if reason := checkManager(ctx, cli); reason != "" {
		_ = cli.Close()
		return nil, "second " + reason
	}
	s.Client = cli
	return s, ""
}

// Stop stops the second Engine (and its sshd), keeping its swarm, so that
// a test sees a destination go away. The test must Start it again; a
// cleanup does, should the test end first.
func (s *Swarm2) Stop(t testing.TB) {
	t.Helper()
	runScript(t, "swarm2-down", "--keep-state")
	t.Cleanup(func() {
		if _, reason := findSwarm2(context.Background()); reason != "" {
			runScript(t, "swarm2-up")
		}
	})
}

// Start starts the second Engine again after Stop; its swarm, certificates
// and keys are the same.
func (s *Swarm2) Start(t testing.TB) {
	t.Helper()
	runScript(t, "swarm2-up")
}

// runScript runs scripts/NAME from the module root, failing t on error.
func runScript(t testing.TB, name string, args ...string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", name), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// moduleRoot finds the directory holding go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
