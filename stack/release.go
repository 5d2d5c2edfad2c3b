// Package stack turns one rendered compose document into the Swarm specs of
// one release, and owns the labels that prove what Skep created.
//
// It is pure: it does no Docker, git or network I/O, so `skep render` and
// tests use it without a daemon. Conversion follows docker/cli's compose
// converter so that Skep deploys what `docker stack deploy` would. References
// from services to secrets and configs carry names only; their ids are
// resolved by apply at write time.
//
// Every label key Skep reads or writes is a constant in labels.go; no other
// package spells one. Owner.Owns is the one test of ownership that apply and
// prune share: it needs a controller id, so an owner without one owns
// nothing and nothing is ever written or deleted on its behalf.
package stack

import (
	"maps"
	"slices"
	"strconv"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/canary"
)

// Owner identifies who owns an object: the controller id, the application
// and the release (stack namespace). The zero value owns nothing.
type Owner struct {
	Controller  string
	Application string
	Release     string
}

// Labels returns the ownership labels for o as a new map, which the caller
// may modify. It includes docker stack's namespace label.
func (o Owner) Labels() map[string]string {
	return map[string]string{
		LabelNamespace:   o.Release,
		LabelController:  o.Controller,
		LabelApplication: o.Application,
		LabelRelease:     o.Release,
	}
}

// Owns reports whether labels name exactly this owner. An owner without a
// controller id owns nothing, so a half-configured caller can never claim
// objects. labels is only read.
func (o Owner) Owns(labels map[string]string) bool {
	return o.Controller != "" &&
		labels[LabelController] == o.Controller &&
		labels[LabelApplication] == o.Application &&
		labels[LabelRelease] == o.Release
}

// WaveOf returns the wave of a service spec: its LabelWave, 0 when it has
// none or one that is not a whole number.
func WaveOf(spec swarm.ServiceSpec) int {
	n, err := strconv.Atoi(spec.Labels[LabelWave])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Waves returns the waves r's services are in, lowest first; [0] for a
// release without services.
func (r Release) Waves() []int {
	seen := map[int]bool{}
	for _, spec := range r.Services {
		seen[WaveOf(spec)] = true
	}
	if len(seen) == 0 {
		return []int{0}
	}
	return slices.Sorted(maps.Keys(seen))
}

// UpTo returns r with only the services in waves up to wave, and every
// network, config and secret: what must run before a later wave starts.
// Maps are shared with r, not copied.
func (r Release) UpTo(wave int) Release {
	out := r
	out.Services = map[string]swarm.ServiceSpec{}
	for name, spec := range r.Services {
		if WaveOf(spec) <= wave {
			out.Services[name] = spec
		}
	}
	return out
}

// Release is the desired Swarm state of one stack namespace. Maps are keyed
// by the object's full name in the swarm ("<release>_<name>", or the
// content-hashed name of a config or secret). A Release is a value: the
// caller that receives one owns it.
type Release struct {
	// Name is the release, which is also its stack namespace.
	Name     string
	Services map[string]swarm.ServiceSpec
	Networks map[string]network.CreateOptions
	Configs  map[string]swarm.ConfigSpec
	Secrets  map[string]swarm.SecretSpec
	// Sensitive are values decrypted from SOPS files (env files,
	// interpolation variables) that the specs may hold in plain. Whatever
	// shows or records the specs shows Masked() instead; they are never
	// encoded or stored. Nil for a release that used no encrypted file.
	Sensitive []string `json:"-" yaml:"-"`
	// Masks holds the fields that came from an encrypted input, as
	// Convert found them (Options.Masked), for Masked(); nil when it did
	// not. Like Sensitive it holds plaintext: it is never encoded or
	// stored, and it is shared by copies, so nobody modifies it.
	Masks FieldMasks `json:"-" yaml:"-"`
	// Warnings are what the render said Swarm ignores (options such as
	// privileged that a service cannot have), as render.Document.Warnings;
	// never encoded or stored.
	Warnings []string `json:"-" yaml:"-"`
	// Hooks are the release's jobs, sorted by service name: not services
	// of the release, so plan, drift and revisions leave them out.
	Hooks []Hook `json:",omitempty"`
	// Canaries are the canary strategies of services, by the service's
	// full name: how a new spec of each rolls out (see package canary).
	// Not stored in revisions; shared by copies, so nobody modifies it.
	Canaries map[string]canary.Strategy `json:"-" yaml:"-"`
}
