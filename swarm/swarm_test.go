package swarm

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"

	"github.com/skep-cd/skep/harness"
)

func TestConnectReachesLocalManagerWithNegotiatedVersion(t *testing.T) {
	harness.RequireSwarm(t)
	c, err := Connect(t.Context(), Options{})
	if err != nil {
		t.Fatalf("Connect(local) = %v, want a client", err)
	}
	defer c.Close()
	server, err := c.ServerVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ClientVersion(); got != server.APIVersion {
		t.Errorf("client API version = %s, want the engine's %s (negotiated)", got, server.APIVersion)
	}
	if id := c.Identity(); id.NodeID == "" || id.ClusterID == "" || id.Nodes < 1 || id.APIVersion != server.APIVersion {
		t.Errorf("Connect: identity %+v, want node, cluster, nodes and the negotiated API version set for a manager", id)
	}
	if _, err := c.ServiceList(t.Context(), swarm.ServiceListOptions{}); err != nil {
		t.Errorf("list services through the client: %v", err)
	}
}

func TestConnectFailsWhenNoEngineAnswers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	c, err := Connect(t.Context(), Options{})
	if err == nil {
		c.Close()
		t.Fatal("Connect to a missing socket succeeded")
	}
	var nm *NotManagerError
	if errors.As(err, &nm) {
		t.Errorf("Connect to a missing socket = %v, want a connection error, not NotManagerError", err)
	}
}

func TestCheckManagerAcceptsOnlyActiveManagers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   swarm.LocalNodeState
		control bool
		wantErr bool
	}{
		{name: "active manager is accepted", state: swarm.LocalNodeStateActive, control: true},
		{name: "worker is refused", state: swarm.LocalNodeStateActive, control: false, wantErr: true},
		{name: "engine outside a swarm is refused", state: swarm.LocalNodeStateInactive, wantErr: true},
		{name: "pending join is refused", state: swarm.LocalNodeStatePending, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := system.Info{Swarm: swarm.Info{LocalNodeState: tc.state, ControlAvailable: tc.control}}
			err := checkManager("unix:///x.sock", info)
			var nm *NotManagerError
			if got := errors.As(err, &nm); got != tc.wantErr {
				t.Fatalf("checkManager(%s, control=%v) = %v, want NotManagerError: %v", tc.state, tc.control, err, tc.wantErr)
			}
		})
	}
}
