package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// Watch records the Engine's service events, with the Engine's own
// timestamps, so that a change is timed at the moment the Engine made it
// and not when a poll noticed. It also counts every event of the types
// the controller's live snapshot follows, split between this run's
// objects and everything else on the swarm, since each may make the
// controller relist. It reads the real Engine socket (not the proxy, whose
// counts it would spoil). It is safe for concurrent use.
type Watch struct {
	prefix string // names of this run's objects start with it

	mu      sync.Mutex
	events  []ServiceEvent
	ours    Counts        // "container start" → how many, this run's objects
	others  Counts        // the same for everything else
	changed chan struct{} // closed and replaced on each new service event
	err     error         // why the stream ended, once it has
}

// snapshotTypes are the event types the controller's live snapshot
// follows (swarm.watchedTypes).
var snapshotTypes = []events.Type{
	events.ServiceEventType, events.ConfigEventType, events.SecretEventType, events.NetworkEventType,
	events.NodeEventType, events.ContainerEventType, events.VolumeEventType,
}

// ServiceEvent is one service event of the Engine.
type ServiceEvent struct {
	Name   string // the service's name
	Action string // create, update or remove
	// Attributes are the event's attributes: an update of the replica count
	// carries "replicas.new", a rolling update's progress "updatestate.new".
	Attributes map[string]string
	At         time.Time
}

// SpecUpdate reports whether e is a service update written by a client,
// not a rolling update's progress report.
func (e ServiceEvent) SpecUpdate() bool {
	_, progress := e.Attributes["updatestate.new"]
	return e.Action == "update" && !progress
}

// WatchServices follows the events of cli's Engine until tb ends. Objects
// whose name (or stack, or service) starts with prefix are this run's.
func WatchServices(tb testing.TB, cli *client.Client, prefix string) *Watch {
	tb.Helper()
	w := &Watch{prefix: prefix, ours: Counts{}, others: Counts{}, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	types := filters.NewArgs()
	for _, t := range snapshotTypes {
		types.Add("type", string(t))
	}
	msgs, errs := cli.Events(ctx, events.ListOptions{Filters: types})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case m := <-msgs:
				w.count(m)
				if m.Type == events.ServiceEventType {
					w.add(ServiceEvent{Name: m.Actor.Attributes["name"], Action: string(m.Action), Attributes: m.Actor.Attributes, At: time.Unix(0, m.TimeNano)})
				}
			case err := <-errs:
				w.stop(err)
				return
			}
		}
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return w
}

// count adds m to the counts. Health checks' exec events are left out:
// the controller drops them unread.
func (w *Watch) count(m events.Message) {
	action := string(m.Action)
	if m.Type == events.ContainerEventType && strings.HasPrefix(action, "exec_") {
		return
	}
	ours := false
	for _, key := range []string{"name", "com.docker.stack.namespace", "com.docker.swarm.service.name"} {
		ours = ours || strings.HasPrefix(m.Actor.Attributes[key], w.prefix)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ours {
		w.ours[string(m.Type)+" "+action]++
	} else {
		w.others[string(m.Type)+" "+action]++
	}
}

// Counted returns copies of the event counts so far: this run's objects,
// and everything else.
func (w *Watch) Counted() (ours, others Counts) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.ours), maps.Clone(w.others)
}

func (w *Watch) add(e ServiceEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *Watch) stop(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		err = errors.New("events stream ended")
	}
	w.err = err
	close(w.changed)
	w.changed = make(chan struct{})
}

// Next waits for the first event of service name after after that match
// accepts, and returns it. It returns an error when ctx ends first or the
// events stream broke.
func (w *Watch) Next(ctx context.Context, name string, after time.Time, match func(ServiceEvent) bool) (ServiceEvent, error) {
	for {
		w.mu.Lock()
		for _, e := range w.events {
			if e.Name == name && e.At.After(after) && match(e) {
				w.mu.Unlock()
				return e, nil
			}
		}
		changed, err := w.changed, w.err
		w.mu.Unlock()
		if err != nil {
			return ServiceEvent{}, fmt.Errorf("service events: %w", err)
		}
		select {
		case <-ctx.Done():
			return ServiceEvent{}, fmt.Errorf("no matching event of service %s: %w", name, ctx.Err())
		case <-changed:
		}
	}
}

// Created matches a service's creation.
func Created(e ServiceEvent) bool { return e.Action == "create" }

// Replicas matches a spec update that set the replica count to n.
func Replicas(n string) func(ServiceEvent) bool {
	return func(e ServiceEvent) bool { return e.SpecUpdate() && e.Attributes["replicas.new"] == n }
}

// Settled matches the end of a rolling update, whichever way it ended.
func Settled(e ServiceEvent) bool {
	switch e.Attributes["updatestate.new"] {
	case "completed", "rollback_completed", "paused", "rollback_paused":
		return true
	}
	return false
}
