// Package swarm connects Skep to the Docker Engines of the swarms it deploys
// to. It is the only package that builds Docker clients; every other step
// receives one (or a narrow interface it declares) from here.
//
// Destination "" is the swarm the controller runs in: the engine named by
// DOCKER_HOST (or the default socket), then any fallback managers
// (LocalDestination). Other destinations come from a destinations file
// (ParseDestinations): managers reached over a unix socket, TCP with
// mutual TLS, or ssh with a checked host key, tried in order. A client always negotiates the API version, since the engines Skep
// meets range from 20.10 (API 1.41) upwards, and Probe refuses an engine
// that is not an active swarm manager, because only a manager can read and
// write services.
//
// This package never writes to the swarm; it only connects and reads. It
// never trusts a peer it cannot verify: no clear-text TCP, no unchecked
// certificate, no ssh host key accepted on first use.
package swarm

import (
	"context"
	"fmt"
	"sync"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// Options selects the swarm a client reaches. The zero value is the local
// swarm.
type Options struct {
	// Destination names the swarm and its managers; the zero value is the
	// swarm the controller runs in, through DOCKER_HOST alone
	// (LocalDestination adds its fallback managers).
	Destination Destination
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

// Client is a Docker Engine API client for one swarm's managers. It embeds
// *client.Client, so it satisfies the narrow interfaces consumers declare
// (apply.Engine). It is safe for concurrent use. Close releases it.
type Client struct {
	*client.Client

	// Destination is the name the client was built for ("" = local).
	Destination string

	dialer *failover // nil for the local swarm without fallback managers

	mu       sync.Mutex
	identity Identity // as the last successful Probe found it
	probed   int32    // the dialer's endpoint that answered that Probe
}

// New builds a client for opts.Destination without reaching it: only the
// files a manager names are read (a missing certificate fails here). The
// first request, or Probe, dials.
func New(opts Options) (*Client, error) {
	dest := opts.Destination
	var (
		api *client.Client
		err error
		f   *failover
	)
	if len(dest.Managers) == 0 {
		if dest.Name != Local {
			return nil, fmt.Errorf("%s: no managers", Describe(dest.Name))
		}
		api, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	} else {
		f = &failover{dest: dest.Name}
		for i, m := range dest.Managers {
			e, err := newEndpoint(m)
			if err != nil {
				return nil, fmt.Errorf("%s, manager %d: %w", Describe(dest.Name), i, err)
			}
			f.endpoints = append(f.endpoints, e)
		}
		// The host is a placeholder for the requests' URLs, as Docker's own
		// connection helpers use: the failover dialer decides where to go.
		api, err = client.NewClientWithOpts(client.WithHost("http://"+hostLabel(dest.Name)),
			client.WithDialContext(f.dial), client.WithAPIVersionNegotiation())
	}
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", Describe(dest.Name), err)
	}
	return &Client{Client: api, Destination: dest.Name, dialer: f, identity: Identity{Destination: dest.Name}}, nil
}

// hostLabel is the placeholder host of a destination's request URLs.
func hostLabel(name string) string {
	if name == Local {
		return "local.skep.invalid"
	}
	return name + ".destination.skep.invalid"
}

// Connect builds a client for opts.Destination and probes it: it blocks
// for one round trip to the engine (bounded by ctx). On error nothing
// stays open.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.Probe(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Probe asks the engine who it is, negotiating the API version on its way
// as any first request does, and checks it is an active swarm manager. The
// identity it finds is what Identity returns from then on. The error names
// the destination.
func (c *Client) Probe(ctx context.Context) (Identity, error) {
	info, err := c.Info(ctx)
	if err != nil {
		if c.dialer != nil && c.dialer.lastError() != nil {
			err = c.dialer.lastError()
		}
		err = sshTrustError(err)
		return Identity{}, fmt.Errorf("reach %s at %s: %w", Describe(c.Destination), c.where(), err)
	}
	if err := checkManager(c.where(), info); err != nil {
		return Identity{}, fmt.Errorf("%s: %w", Describe(c.Destination), err)
	}
	id := Identity{Destination: c.Destination, NodeID: info.Swarm.NodeID, EngineVersion: info.ServerVersion,
		APIVersion: c.ClientVersion(), Nodes: info.Swarm.Nodes, Managers: info.Swarm.Managers}
	if info.Swarm.Cluster != nil {
		id.ClusterID = info.Swarm.Cluster.ID
	}
	c.mu.Lock()
	c.identity = id
	if c.dialer != nil {
		c.probed = c.dialer.last.Load()
	}
	c.mu.Unlock()
	return id, nil
}

// Moved reports whether c talks to another manager than the one its last
// Probe found, having failed over since: Identity is stale until the next
// Probe. A client of one engine never moves.
func (c *Client) Moved() bool {
	if c.dialer == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probed != c.dialer.last.Load()
}

// where names the engine address for messages: the daemon host, or "its
// managers" where the failover dialer chooses (and names) the manager.
func (c *Client) where() string {
	if c.dialer == nil {
		return c.DaemonHost()
	}
	return "its managers"
}

// Identity names the manager a client talks to, for status pages.
type Identity struct {
	Destination   string
	NodeID        string
	ClusterID     string
	EngineVersion string
	// APIVersion is the Engine API version negotiated with it.
	APIVersion string
	// Nodes and Managers count the swarm's nodes.
	Nodes    int
	Managers int
}

// Identity returns who c talks to, as the last successful Probe found it;
// only Destination is set before one.
func (c *Client) Identity() Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.identity
}

// checkManager returns a *NotManagerError unless info describes an active
// swarm manager.
func checkManager(host string, info system.Info) error {
	if info.Swarm.LocalNodeState == swarm.LocalNodeStateActive && info.Swarm.ControlAvailable {
		return nil
	}
	return &NotManagerError{Host: host, State: info.Swarm.LocalNodeState, ControlAvailable: info.Swarm.ControlAvailable}
}
