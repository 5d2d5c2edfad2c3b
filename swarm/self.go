package swarm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// Self is the swarm service this process runs as, found from the container
// it runs in. The zero value means it runs as no service: outside a
// container, or in a container no swarm task started.
type Self struct {
	ServiceID   string
	ServiceName string
	ContainerID string
}

// Labels Swarm puts on a task's container.
const (
	labelServiceID   = "com.docker.swarm.service.id"
	labelServiceName = "com.docker.swarm.service.name"
)

// ContainerInspector reads one container; *Client satisfies it.
type ContainerInspector interface {
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
}

// FindSelf asks the Engine which service the container this process runs
// in belongs to. The candidates are the host name (a container's default
// one is its short id) and the container ids in mountinfo, whose lines
// show the Engine's per-container files (hostname, hosts, resolv.conf)
// even when the host name was set. A candidate the Engine does not know
// is skipped; only another Engine failure is an error.
func FindSelf(ctx context.Context, eng ContainerInspector, hostname string, mountinfo io.Reader) (Self, error) {
	candidates := []string{}
	if hostname != "" {
		candidates = append(candidates, hostname)
	}
	if mountinfo != nil {
		ids, err := containerIDs(mountinfo)
		if err != nil {
			return Self{}, fmt.Errorf("read mountinfo: %w", err)
		}
		for _, id := range ids {
			if !slices.Contains(candidates, id) {
				candidates = append(candidates, id)
			}
		}
	}
	for _, id := range candidates {
		c, err := eng.ContainerInspect(ctx, id)
		if cerrdefs.IsNotFound(err) || cerrdefs.IsInvalidArgument(err) {
			continue
		}
		if err != nil {
			return Self{}, fmt.Errorf("inspect container %s: %w", id, err)
		}
		if c.Config == nil || c.Config.Labels[labelServiceID] == "" {
			continue
		}
		return Self{ServiceID: c.Config.Labels[labelServiceID], ServiceName: c.Config.Labels[labelServiceName], ContainerID: c.ID}, nil
	}
	return Self{}, nil
}

// FindSelfHere is FindSelf with this process's host name and mountinfo;
// a missing mountinfo (not Linux) leaves only the host name.
func FindSelfHere(ctx context.Context, eng ContainerInspector) (Self, error) {
	hostname, _ := os.Hostname()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return FindSelf(ctx, eng, hostname, nil)
	}
	defer f.Close()
	return FindSelf(ctx, eng, hostname, f)
}

// containerPath matches an Engine's per-container directory in a mount's
// root.
var containerPath = regexp.MustCompile(`/containers/([0-9a-f]{64})/`)

// engineFiles are the files the Engine bind-mounts into every container
// from its per-container directory.
var engineFiles = []string{"/etc/hostname", "/etc/hosts", "/etc/resolv.conf"}

// containerIDs returns the container ids mountinfo's lines name, in order,
// each once. Only a line that mounts one of the Engine's per-container
// files counts, and only its root (the 4th field): on a host, mountinfo
// also lists other containers' directories (their shm and secrets
// mounts), which name containers this process does not run in.
func containerIDs(mountinfo io.Reader) ([]string, error) {
	var ids []string
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !slices.Contains(engineFiles, f[4]) {
			continue
		}
		if m := containerPath.FindStringSubmatch(f[3]); m != nil && !slices.Contains(ids, m[1]) {
			ids = append(ids, m[1])
		}
	}
	return ids, sc.Err()
}
