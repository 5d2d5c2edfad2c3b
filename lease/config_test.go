package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/lease"
)

// TestConfigIsACompareAndSwapOnTheSwarm holds the Swarm config store to
// the Store contract on the real swarm: a write over a stale version
// conflicts, a second create conflicts, and the record reads back whole.
func TestConfigIsACompareAndSwapOnTheSwarm(t *testing.T) {
	docker := harness.RequireSwarm(t)
	id := harness.Name(t, "lease")
	t.Cleanup(func() {
		_ = docker.ConfigRemove(context.WithoutCancel(t.Context()), lease.ConfigName(id))
	})
	store := lease.Config{Engine: docker, Controller: id}
	ctx := t.Context()

	if _, _, found, err := store.Get(ctx); err != nil || found {
		t.Fatalf("Get before any write = found %v, %v; want not found", found, err)
	}
	first := lease.Record{Holder: "a/1", Name: "a", Addr: "10.0.0.1:8080", Version: "v1.2.3", Term: 1, Events: 9,
		Duration: 8 * time.Second, Renewed: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)}
	if err := store.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, first); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("second Create = %v, want ErrConflict", err)
	}
	got, v1, found, err := store.Get(ctx)
	if err != nil || !found {
		t.Fatalf("Get = found %v, %v", found, err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("record read back (-written +read):\n%s", diff)
	}
	second := first
	second.Holder, second.Term = "b/1", 2
	if err := store.Update(ctx, v1, second); err != nil {
		t.Fatal(err)
	}
	// The version read before the update is stale now: the swap loses.
	if err := store.Update(ctx, v1, first); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("Update over a stale version = %v, want ErrConflict", err)
	}
	got, v2, _, err := store.Get(ctx)
	if err != nil || got.Holder != "b/1" || got.Term != 2 || v2 <= v1 {
		t.Errorf("after the swap: %+v at version %d (was %d), %v; want b's term 2 at a higher version", got, v2, v1, err)
	}
}
