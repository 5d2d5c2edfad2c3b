package harness

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// EnvRequireSwarm names the variable that turns a missing swarm from a skip
// into a failure.
const EnvRequireSwarm = "SKEP_REQUIRE_SWARM"

// SwarmRequired reports whether the environment demands a swarm.
// Only "1" counts, so SKEP_REQUIRE_SWARM=0 means what it says.
func SwarmRequired() bool { return os.Getenv(EnvRequireSwarm) == "1" }

// RequireSwarm returns a Docker client for a local engine that is an active
// swarm manager. When none answers it fails the test if SwarmRequired, and
// skips it with the reason otherwise. The client is closed in t.Cleanup.
func RequireSwarm(t testing.TB) *client.Client {
	t.Helper()
	cli, reason := findSwarm(t.Context())
	if cli == nil {
		if SwarmRequired() {
			t.Fatalf("%s=1 but no swarm manager answers: %s (run scripts/swarm-up)", EnvRequireSwarm, reason)
		}
		t.Skipf("no swarm manager: %s (set %s=1 to make this a failure)", reason, EnvRequireSwarm)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// findSwarm returns a client of a local swarm manager, or nil and the
// reason there is none; the caller owns the client.
func findSwarm(ctx context.Context) (*client.Client, string) {
	// FromEnv honours DOCKER_HOST, as the developer's docker CLI does; the
	// negotiation lets an older test engine answer.
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, "docker client: " + err.Error()
	}
	if reason := checkManager(ctx, cli); reason != "" {
		_ = cli.Close()
		return nil, reason
	}
	return cli, ""
}

// checkManager returns "" when cli's engine answers as an active swarm
// manager, and what is wrong otherwise. A socket nobody answers on must
// skip or fail the test, not hang it, hence the timeout.
func checkManager(ctx context.Context, cli *client.Client) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := cli.Info(ctx)
	if err != nil {
		return "docker engine: " + err.Error()
	}
	// A worker node is in a swarm but cannot create services.
	if info.Swarm.LocalNodeState != "active" || !info.Swarm.ControlAvailable {
		return "engine " + info.ServerVersion + " is not a swarm manager (state " + string(info.Swarm.LocalNodeState) + ")"
	}
	return ""
}
