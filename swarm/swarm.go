// Package swarm connects Skep to the Docker Engines of the swarms it deploys
// to. It is the only package that builds Docker clients; every other step
// receives one (or a narrow interface it declares) from here.
//
// Today only the local swarm is supported: destination "" reaches the
// engine named by DOCKER_HOST (or the default socket). A client always
// negotiates the API version, since the engines Skep meets range from
// 20.10 (API 1.41) upwards, and Connect refuses an engine that is not an
// active swarm manager, because only a manager can read and write services.
//
// This package never writes to the swarm; it only connects and reads.
package swarm

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// ErrNamedSwarm is returned by Connect for any destination other than the
// local swarm ("").
var ErrNamedSwarm = errors.New("named swarms are not supported yet; use destination \"\" for the local swarm")

// Options selects the swarm Connect reaches. The zero value is the local
// swarm.
type Options struct {
	// Destination names the swarm; "" is the swarm the controller runs in.
	Destination string
}

// NotManagerError says the engine answered but cannot manage the swarm:
// it is not in a swarm, or it is a worker.
type NotManagerError struct {
	Host string // the engine address that answered
	// State is the engine's swarm membership; "active" for a worker.
	State swarm.LocalNodeState
	// ControlAvailable is true only on a manager.
	ControlAvailable bool
}

// Error says what the engine is and what to do about it.
func (e *NotManagerError) Error() string {
	if e.State != swarm.LocalNodeStateActive {
		return fmt.Sprintf("engine at %s is not a swarm manager: swarm state is %q (run `docker swarm init` or join as a manager)", e.Host, e.State)
	}
	return fmt.Sprintf("engine at %s is a swarm worker, not a manager: deploy through a manager node", e.Host)
}

// Client is a Docker Engine API client for one swarm manager. It embeds
// *client.Client, so it satisfies the narrow interfaces consumers declare
// (apply.Engine). It is safe for concurrent use. Close releases it.
type Client struct {
	*client.Client

	// Destination is the name the client was connected for ("" = local).
	Destination string
	// NodeID and ClusterID identify the manager node and its swarm.
	NodeID    string
	ClusterID string
	// EngineVersion is the engine's version, e.g. "20.10.24".
	EngineVersion string
}

// Connect builds a client for opts.Destination, negotiates the API version
// and checks that the engine is an active swarm manager. It blocks for one
// round trip to the engine (bounded by ctx). On error nothing stays open.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if opts.Destination != "" {
		return nil, fmt.Errorf("connect to swarm %q: %w", opts.Destination, ErrNamedSwarm)
	}
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client for the local swarm: %w", err)
	}
	// Info negotiates the API version on its way, as any first request does.
	info, err := api.Info(ctx)
	if err != nil {
		_ = api.Close()
		return nil, fmt.Errorf("reach docker engine at %s: %w", api.DaemonHost(), err)
	}
	if err := checkManager(api.DaemonHost(), info); err != nil {
		_ = api.Close()
		return nil, err
	}
	c := &Client{
		Client:        api,
		Destination:   opts.Destination,
		NodeID:        info.Swarm.NodeID,
		EngineVersion: info.ServerVersion,
	}
	if info.Swarm.Cluster != nil {
		c.ClusterID = info.Swarm.Cluster.ID
	}
	return c, nil
}

// Identity names the manager a client talks to, for status pages. Its
// fields are those of Client.
type Identity struct {
	Destination   string
	NodeID        string
	ClusterID     string
	EngineVersion string
}

// Identity returns who c talks to, as Connect found it.
func (c *Client) Identity() Identity {
	return Identity{Destination: c.Destination, NodeID: c.NodeID, ClusterID: c.ClusterID, EngineVersion: c.EngineVersion}
}

// checkManager returns a *NotManagerError unless info describes an active
// swarm manager.
func checkManager(host string, info system.Info) error {
	if info.Swarm.LocalNodeState == swarm.LocalNodeStateActive && info.Swarm.ControlAvailable {
		return nil
	}
	return &NotManagerError{Host: host, State: info.Swarm.LocalNodeState, ControlAvailable: info.Swarm.ControlAvailable}
}
