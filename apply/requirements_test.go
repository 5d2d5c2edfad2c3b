package apply

import (
	"context"
	"errors"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// networkMaker is a NetworkMaker holding networks by name; create answers
// the given error for the names in fail.
type networkMaker struct {
	have    []network.Summary
	fail    map[string]error
	lost    map[string]bool // names another writer creates when this one fails
	created map[string]network.CreateOptions
}

func (m *networkMaker) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return m.have, nil
}

func (m *networkMaker) NetworkCreate(_ context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	if err := m.fail[name]; err != nil {
		if m.lost[name] {
			// Another writer created it a moment before.
			m.have = append(m.have, network.Summary{Name: name})
		}
		return network.CreateResponse{}, err
	}
	if m.created == nil {
		m.created = map[string]network.CreateOptions{}
	}
	m.created[name] = o
	return network.CreateResponse{ID: "id-" + name}, nil
}

func TestCreateRequiredCreatesOnlyMissingNetworksLabelledOutsideAnyStack(t *testing.T) {
	owner := stack.Owner{Controller: "ctl", Application: "web", Release: "web"}
	nets := []RequiredNetwork{{Name: "edge", Driver: "overlay", Attachable: true}, {Name: "present"}, {Name: "raced"}, {Name: "swarmkit-raced"}, {Name: "plain"}}
	m := &networkMaker{
		// The name filter matches loosely: "edge-old" does not make edge exist.
		have: []network.Summary{{Name: "present"}, {Name: "edge-old"}},
		// swarmkit reports a lost race as an Unknown error, not a Conflict.
		fail: map[string]error{"raced": cerrdefs.ErrConflict,
			"swarmkit-raced": errors.New("rpc error: code = Unknown desc = name conflicts with an existing object")},
		lost: map[string]bool{"swarmkit-raced": true},
	}
	changes, err := CreateRequired(t.Context(), m, owner, nets)
	if err != nil {
		t.Fatalf("CreateRequired() = %v", err)
	}
	var names []string
	for _, c := range changes {
		if c.Kind != KindNetwork || c.Action != Created {
			t.Errorf("change %+v, want a created network", c)
		}
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"edge", "plain"}, names); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	labels := map[string]string{stack.LabelController: "ctl", stack.LabelApplication: "web", stack.LabelRelease: "web", stack.LabelKind: stack.KindRequirement}
	want := map[string]network.CreateOptions{
		"edge":  {Driver: "overlay", Scope: "swarm", Attachable: true, Labels: labels},
		"plain": {Driver: "overlay", Scope: "swarm", Labels: labels},
	}
	if diff := cmp.Diff(want, m.created); diff != "" {
		t.Errorf("NetworkCreate calls (-want +got):\n%s", diff)
	}
}

func TestCreateRequiredClassesTheEnginesRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want outcome.Class
	}{
		{"a driver the engine refuses is stalled", cerrdefs.ErrInvalidArgument, outcome.Stalled},
		{"an engine that did not answer is transient", errors.New("connection reset"), outcome.Transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &networkMaker{fail: map[string]error{"edge": tc.err}}
			_, err := CreateRequired(t.Context(), m, stack.Owner{Controller: "ctl", Release: "web"}, []RequiredNetwork{{Name: "edge"}})
			if got := outcome.Of(err); got != tc.want {
				t.Errorf("CreateRequired() = %v, class %v, want %v", err, got, tc.want)
			}
		})
	}
}
