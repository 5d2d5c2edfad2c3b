package swarm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/harness"
)

const (
	idA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	idB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// mountinfo is /proc/self/mountinfo as a container sees it: the Engine's
// per-container files are bind mounts from its containers directory.
func mountinfo(id string) string {
	return fmt.Sprintf(`1234 1100 0:55 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
1250 1234 254:1 /var/lib/docker/containers/%[1]s/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda1 rw
1251 1234 254:1 /var/lib/docker/containers/%[1]s/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw
1252 1234 254:1 /var/lib/docker/containers/%[1]s/hosts /etc/hosts rw,relatime - ext4 /dev/vda1 rw
`, id)
}

func TestContainerIDsReadsEachIdOnceInOrder(t *testing.T) {
	in := mountinfo(idA) + mountinfo(idB) + "99 1 0:1 /containers/short/ /x rw - tmpfs tmpfs rw\n"
	got, err := containerIDs(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{idA, idB}, got); d != "" {
		t.Errorf("ids (-want +got):\n%s", d)
	}
	// A host's mountinfo lists the shm and secrets mounts of the
	// containers that run there: none of them is this process's own.
	host := "1 0 0:1 / / rw - ext4 /dev/vda1 rw\n" +
		"520 28 0:60 / /var/lib/docker/containers/" + idA + "/mounts/shm rw,nosuid - tmpfs shm rw,size=65536k\n" +
		"530 28 0:61 / /var/lib/docker/containers/" + idB + "/mounts/secrets rw,relatime - tmpfs tmpfs rw\n" +
		"540 28 254:1 /var/lib/docker/containers/" + idB + "/hostname /var/lib/docker/x/hostname rw - ext4 /dev/vda1 rw\n"
	if got, _ := containerIDs(strings.NewReader(host)); len(got) != 0 {
		t.Errorf("ids of a host's mountinfo = %v, want none", got)
	}
	// /var/lib/docker on a file system of its own: the root is relative
	// to it.
	own := "1250 1234 254:2 /containers/" + idA + "/hostname /etc/hostname rw - ext4 /dev/vdb rw\n"
	if got, _ := containerIDs(strings.NewReader(own)); !slices.Equal(got, []string{idA}) {
		t.Errorf("ids with /var/lib/docker on its own file system = %v, want [%s]", got, idA)
	}
}

// The Engine names the service of a task container found by its short id
// (the default host name) or by a mountinfo line; a process in no task
// container finds no service and no error.
func TestFindSelfNamesTheServiceOfTheContainer(t *testing.T) {
	cli := harness.RequireSwarm(t)
	ns := harness.Name(t, "self")
	harness.CleanupStack(t, cli, ns)
	image := harness.TestImage(t, cli, harness.ImageOptions{})
	replicas := uint64(1)
	resp, err := cli.ServiceCreate(t.Context(), swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: ns + "_controller"},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: image}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitRunning(t, cli, resp.ID, 1, 2*time.Minute)
	tasks, err := cli.TaskList(t.Context(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", resp.ID), filters.Arg("desired-state", "running"))})
	if err != nil || len(tasks) != 1 || tasks[0].Status.ContainerStatus == nil {
		t.Fatalf("tasks: %+v, %v", tasks, err)
	}
	container := tasks[0].Status.ContainerStatus.ContainerID
	want := Self{ServiceID: resp.ID, ServiceName: ns + "_controller", ContainerID: container}

	for name, tc := range map[string]struct {
		hostname, mounts string
		want             Self
	}{
		"by the default host name":                {hostname: container[:12], want: want},
		"by mountinfo when the host name was set": {hostname: "web-1", mounts: mountinfo(container), want: want},
		"outside any task container":              {hostname: "build-host", mounts: mountinfo(idA), want: Self{}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := FindSelf(t.Context(), cli, tc.hostname, strings.NewReader(tc.mounts))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("FindSelf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
