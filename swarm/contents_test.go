package swarm

import (
	"errors"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
)

// TestNewSnapshotAnswersLikeAWatchersSnapshot: a snapshot built from
// contents answers every lookup from them, and its read error makes it
// one that failed.
func TestNewSnapshotAnswersLikeAWatchersSnapshot(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	svc := swarm.Service{ID: "s1", Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "web_api",
		Labels: map[string]string{"com.docker.stack.namespace": "web"}}}}
	task := swarm.Task{ID: "t1", ServiceID: "s1"}
	services := []swarm.Service{svc}
	snap := NewSnapshot(Contents{Services: services, Tasks: []swarm.Task{task}, TakenAt: at, Version: 4})
	services[0].ID = "changed" // the snapshot holds its own copy
	if got, ok := snap.Service("web_api"); !ok || got.ID != "s1" {
		t.Errorf("Service(web_api) = %v, %t; want s1", got.ID, ok)
	}
	if got := snap.TasksOf("s1"); len(got) != 1 || got[0].ID != "t1" {
		t.Errorf("TasksOf(s1) = %v, want t1", got)
	}
	if got := snap.Namespace("web").Services; len(got) != 1 {
		t.Errorf("Namespace(web) holds %d services, want 1", len(got))
	}
	if snap.TakenAt() != at || snap.TasksAt() != at || snap.Version() != 4 || snap.ReadFailed() {
		t.Errorf("taken %v, tasks %v, version %d, failed %t; want %v, %v, 4, false", snap.TakenAt(), snap.TasksAt(), snap.Version(), snap.ReadFailed(), at, at)
	}
	failed := NewSnapshot(Contents{Err: errors.New("no answer")})
	if !failed.ReadFailed() {
		t.Error("a snapshot with a read error does not say it failed")
	}
}
