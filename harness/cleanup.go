package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
)

// CleanupStack removes, when the test ends, every service, network, config
// and secret labelled with com.docker.stack.namespace=namespace or named
// with the "namespace_" prefix. Networks, configs and secrets stay in use
// until their tasks drain, so removal is retried for up to a minute.
func CleanupStack(t testing.TB, cli *client.Client, namespace string) {
	t.Helper()
	t.Cleanup(func() {
		// t.Context is already cancelled when Cleanup functions run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		if err := RemoveStack(ctx, cli, namespace); err != nil {
			t.Errorf("cleanup of stack %s: %v", namespace, err)
		}
	})
}

// RemoveStack deletes what CleanupStack describes, now, retrying while tasks
// drain, until ctx ends. It returns the last error when something remains.
// Safe to call for a namespace with nothing left: it then returns nil.
func RemoveStack(ctx context.Context, cli *client.Client, namespace string) error {
	ns := filters.NewArgs(filters.Arg("label", "com.docker.stack.namespace="+namespace))
	// Objects created by hand in a test carry no namespace label; the name
	// prefix finds them. The daemon's name filter is a loose match, so owned
	// checks the prefix again before anything is removed.
	byName := filters.NewArgs(filters.Arg("name", namespace+"_"))
	owned := func(name string, labels map[string]string) bool {
		return labels["com.docker.stack.namespace"] == namespace || strings.HasPrefix(name, namespace+"_")
	}
	var last error
	for {
		// Each pass starts afresh: only what failed in this pass is reported.
		last = nil
		for _, f := range []filters.Args{ns, byName} {
			services, err := cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: f})
			if err != nil {
				last = err
			}
			for _, s := range services {
				if owned(s.Spec.Name, s.Spec.Labels) {
					if err := cli.ServiceRemove(ctx, s.ID); err != nil && !cerrdefs.IsNotFound(err) {
						last = err
					}
				}
			}
		}
		for _, f := range []filters.Args{ns, byName} {
			nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
			if err != nil {
				last = err
			}
			for _, n := range nets {
				if owned(n.Name, n.Labels) {
					if err := cli.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
						last = err
					}
				}
			}
			configs, err := cli.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
			if err != nil {
				last = err
			}
			for _, c := range configs {
				if owned(c.Spec.Name, c.Spec.Labels) {
					if err := cli.ConfigRemove(ctx, c.ID); err != nil && !cerrdefs.IsNotFound(err) {
						last = err
					}
				}
			}
			secrets, err := cli.SecretList(ctx, swarm.SecretListOptions{Filters: f})
			if err != nil {
				last = err
			}
			for _, s := range secrets {
				if owned(s.Spec.Name, s.Spec.Labels) {
					if err := cli.SecretRemove(ctx, s.ID); err != nil && !cerrdefs.IsNotFound(err) {
						last = err
					}
				}
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		// Swarm removes a service's tasks asynchronously; until they are gone,
		// their networks, configs and secrets refuse removal.
		case <-time.After(time.Second):
		}
	}
}
