package apply

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	dockerregistry "github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// fixture is one test's namespace on the real swarm.
type fixture struct {
	cli   *client.Client
	owner stack.Owner
	ns    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cli := harness.RequireSwarm(t)
	ns := harness.Name(t, "ap")
	harness.CleanupStack(t, cli, ns)
	return &fixture{cli: cli, ns: ns, owner: stack.Owner{Controller: harness.Name(t, "ctl"), Application: "shop", Release: ns}}
}

func (f *fixture) opts(t *testing.T, policy ResolveImage) Options {
	return Options{
		Owner:        f.owner,
		ResolveImage: policy,
		Commit:       "c0ffee",
		Actor:        "alice",
		Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// release builds a stack.Release by hand, the shape render/stack produce:
// one network, one config and one secret under content-hashed names, and
// one dnsrr service using all three by name.
func (f *fixture) release(image, configData string) stack.Release {
	ns := f.ns
	nsLabel := map[string]string{stack.LabelNamespace: ns}
	conf := fmt.Sprintf("%s_conf-%x", ns, sha256.Sum256([]byte(configData)))[:len(ns)+6+12]
	secret := ns + "_token-1"
	replicas := uint64(1)
	file := func(n string) *swarm.ConfigReferenceFileTarget {
		return &swarm.ConfigReferenceFileTarget{Name: n, UID: "0", GID: "0", Mode: 0o444}
	}
	return stack.Release{
		Name:     ns,
		Networks: map[string]network.CreateOptions{ns + "_default": {Driver: "overlay", Labels: nsLabel}},
		Configs:  map[string]swarm.ConfigSpec{conf: {Annotations: swarm.Annotations{Name: conf, Labels: nsLabel}, Data: []byte(configData)}},
		Secrets:  map[string]swarm.SecretSpec{secret: {Annotations: swarm.Annotations{Name: secret, Labels: nsLabel}, Data: []byte("s3cret-value")}},
		Services: map[string]swarm.ServiceSpec{ns + "_web": {
			Annotations: swarm.Annotations{Name: ns + "_web", Labels: map[string]string{stack.LabelNamespace: ns, stack.LabelStackImage: image}},
			TaskTemplate: swarm.TaskSpec{
				ContainerSpec: &swarm.ContainerSpec{
					Image:   image,
					Env:     []string{"MODE=test"},
					Labels:  nsLabel,
					Configs: []*swarm.ConfigReference{{File: file("/etc/app.conf"), ConfigName: conf}},
					Secrets: []*swarm.SecretReference{{File: (*swarm.SecretReferenceFileTarget)(file("token")), SecretName: secret}},
				},
				Networks:  []swarm.NetworkAttachmentConfig{{Target: ns + "_default", Aliases: []string{"web"}}},
				Placement: &swarm.Placement{},
			},
			Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
			EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
		}},
	}
}

func (f *fixture) service(t *testing.T, name string) swarm.Service {
	t.Helper()
	s, _, err := f.cli.ServiceInspectWithRaw(t.Context(), name, swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatalf("inspect service %s: %v", name, err)
	}
	return s
}

// settled waits until no rolling update of the service is in progress, so
// its version index moves only when someone writes to it.
func (f *fixture) settled(t *testing.T, name string) swarm.Service {
	t.Helper()
	var s swarm.Service
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s = f.service(t, name)
		if s.UpdateStatus == nil || s.UpdateStatus.State != swarm.UpdateStateUpdating && s.UpdateStatus.State != swarm.UpdateStateRollbackStarted {
			return true, ""
		}
		return false, fmt.Sprintf("update %s: %s", s.UpdateStatus.State, s.UpdateStatus.Message)
	})
	return s
}

// unwritten reports whether after is before's service with no write since:
// a write changes the spec or, when the spec is the same, sets the previous
// spec. The version index is no measure: Swarm moves it itself as a new
// service's status settles.
func unwritten(before, after swarm.Service) bool {
	return after.ID == before.ID && reflect.DeepEqual(after.Spec, before.Spec) && reflect.DeepEqual(after.PreviousSpec, before.PreviousSpec)
}

func actions(r Result) map[string]Action {
	out := make(map[string]Action)
	for _, c := range r.Changes {
		out[string(c.Kind)+" "+c.Name] = c.Action
	}
	return out
}

func mustApply(t *testing.T, rel stack.Release, eng Engine, opts Options) Result {
	t.Helper()
	res, err := Apply(t.Context(), eng, rel, opts)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

func TestApplyInstallCreatesOwnedObjectsAndRevisionOne(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	rel := f.release(image, "listen 80\n")
	res := mustApply(t, rel, f.cli, f.opts(t, ResolveNever))

	conf := sortedKeys(rel.Configs)[0]
	secret := sortedKeys(rel.Secrets)[0]
	want := map[string]Action{
		"network " + f.ns + "_default":      Created,
		"config " + conf:                    Created,
		"secret " + secret:                  Created,
		"service " + f.ns + "_web":          Created,
		"revision " + revisionName(f.ns, 1): Created,
	}
	if diff := cmp.Diff(want, actions(res)); diff != "" {
		t.Errorf("install changes (-want +got):\n%s", diff)
	}
	if res.Revision != 1 {
		t.Errorf("Result.Revision = %d, want 1", res.Revision)
	}

	svc := f.service(t, f.ns+"_web")
	nets, err := f.cli.NetworkList(t.Context(), network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", f.ns+"_default"))})
	if err != nil || len(nets) != 1 {
		t.Fatalf("network list = %v, %v; want one network", nets, err)
	}
	configs, err := f.cli.ConfigList(t.Context(), swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", conf))})
	if err != nil || len(configs) != 1 {
		t.Fatalf("config list = %v, %v; want one config", configs, err)
	}
	secrets, err := f.cli.SecretList(t.Context(), swarm.SecretListOptions{Filters: filters.NewArgs(filters.Arg("name", secret))})
	if err != nil || len(secrets) != 1 {
		t.Fatalf("secret list = %v, %v; want one secret", secrets, err)
	}
	for what, labels := range map[string]map[string]string{
		"service": svc.Spec.Labels, "network": nets[0].Labels, "config": configs[0].Spec.Labels, "secret": secrets[0].Spec.Labels,
	} {
		if !f.owner.Owns(labels) || labels[stack.LabelNamespace] != f.ns {
			t.Errorf("%s labels = %v, want the owner's %v", what, labels, f.owner.Labels())
		}
	}
	cs := svc.Spec.TaskTemplate.ContainerSpec
	if cs.Configs[0].ConfigID != configs[0].ID || cs.Secrets[0].SecretID != secrets[0].ID {
		t.Errorf("service refers to config %q and secret %q, want ids %q and %q",
			cs.Configs[0].ConfigID, cs.Secrets[0].SecretID, configs[0].ID, secrets[0].ID)
	}
	if svc.Spec.Labels[stack.LabelSpecHash] == "" {
		t.Errorf("service has no %s label", stack.LabelSpecHash)
	}

	rev, err := LatestRevision(t.Context(), f.cli, f.owner)
	if err != nil || rev == nil {
		t.Fatalf("LatestRevision = %v, %v; want revision 1", rev, err)
	}
	if rev.Number != 1 || rev.Commit != "c0ffee" || rev.Actor != "alice" || rev.Application != "shop" {
		t.Errorf("revision = number %d commit %q actor %q application %q, want 1 c0ffee alice shop", rev.Number, rev.Commit, rev.Actor, rev.Application)
	}
	if got := string(rev.Release.Secrets[secret].Data); got == "s3cret-value" || !strings.HasPrefix(got, "sha256:") {
		t.Errorf("revision stores secret data %q, want its sha256", got)
	}
	if diff := cmp.Diff(rel.Services, rev.Release.Services); diff != "" {
		t.Errorf("revision services differ from the applied release (-applied +recorded):\n%s", diff)
	}
	if rev.Images[f.ns+"_web"] != cs.Image {
		t.Errorf("revision image = %q, want the deployed %q", rev.Images[f.ns+"_web"], cs.Image)
	}
	revConfigs, err := f.cli.ConfigList(t.Context(), swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("label", stack.LabelKind+"="+stack.KindRevision), filters.Arg("label", stack.LabelNamespace+"="+f.ns))})
	if err != nil || len(revConfigs) != 1 {
		t.Fatalf("revision configs = %v, %v; want one", revConfigs, err)
	}
	raw, err := gunzip(revConfigs[0].Spec.Data)
	if err != nil || strings.Contains(string(raw), "s3cret-value") || strings.Contains(string(raw), "czNjcmV0LXZhbHVl") {
		t.Errorf("revision config holds the secret in plain text or is not gzip (%v)", err)
	}
	if l := revConfigs[0].Spec.Labels; l[stack.LabelRevision] != "1" || l[stack.LabelCommit] != "c0ffee" || !f.owner.Owns(l) {
		t.Errorf("revision config labels = %v, want owner labels, revision 1 and commit c0ffee", l)
	}
}

func TestApplyTwiceWritesNothing(t *testing.T) {
	f := newFixture(t)
	reg := harness.StartRegistry(t)
	image := reg.Push(t, f.cli, harness.TestImage(t, f.cli, harness.ImageOptions{}), "apply/web", "v1")
	rel := f.release(image, "listen 80\n")
	// The default policy, always, pins digests and platforms; the second
	// apply must see its own pinned spec as unchanged.
	opts := f.opts(t, "")
	mustApply(t, rel, f.cli, opts)
	before := f.settled(t, f.ns+"_web")

	res := mustApply(t, rel, f.cli, opts)
	for _, c := range res.Changes {
		if c.Action != Unchanged {
			t.Errorf("second apply: %s %s %s, want unchanged", c.Kind, c.Name, c.Action)
		}
	}
	if res.Revision != 0 || res.Changed() {
		t.Errorf("second apply wrote revision %d (changed %v), want none", res.Revision, res.Changed())
	}
	after := f.service(t, f.ns+"_web")
	if !unwritten(before, after) {
		t.Errorf("service %+v → %+v, want no write", before, after)
	}
	revs, err := Revisions(t.Context(), f.cli, f.owner)
	if err != nil || len(revs) != 1 {
		t.Errorf("Revisions = %d, %v; want only revision 1", len(revs), err)
	}
}

// Force (skep deploy --force) redeploys an unchanged spec: the service's
// ForceUpdate counter moves, so Swarm restarts its tasks.
func TestApplyForceRedeploysAnUnchangedService(t *testing.T) {
	f := newFixture(t)
	v1 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v1"})
	rel := f.release(v1, "listen 80\n")
	mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	before := f.settled(t, f.ns+"_web")

	opts := f.opts(t, ResolveNever)
	opts.Force = true
	res := mustApply(t, rel, f.cli, opts)
	if got := actions(res)["service "+f.ns+"_web"]; got != Updated {
		t.Errorf("forced service action = %q, want updated", got)
	}
	after := f.service(t, f.ns+"_web")
	if after.Spec.TaskTemplate.ForceUpdate != before.Spec.TaskTemplate.ForceUpdate+1 {
		t.Errorf("ForceUpdate %d → %d, want one more", before.Spec.TaskTemplate.ForceUpdate, after.Spec.TaskTemplate.ForceUpdate)
	}
	if after.Spec.TaskTemplate.ContainerSpec.Image != before.Spec.TaskTemplate.ContainerSpec.Image {
		t.Errorf("forced apply changed the image: %s → %s", before.Spec.TaskTemplate.ContainerSpec.Image, after.Spec.TaskTemplate.ContainerSpec.Image)
	}
}

func TestApplyImageChangeUpdatesServiceAndWritesRevisionTwo(t *testing.T) {
	f := newFixture(t)
	v1 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v1"})
	v2 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v2"})
	mustApply(t, f.release(v1, "listen 80\n"), f.cli, f.opts(t, ResolveNever))
	created := f.settled(t, f.ns+"_web")

	res := mustApply(t, f.release(v2, "listen 80\n"), f.cli, f.opts(t, ResolveNever))
	if got := actions(res)["service "+f.ns+"_web"]; got != Updated {
		t.Errorf("service action = %q, want updated", got)
	}
	if got := actions(res)["network "+f.ns+"_default"]; got != Unchanged {
		t.Errorf("network action = %q, want unchanged", got)
	}
	if res.Revision != 2 {
		t.Errorf("Result.Revision = %d, want 2", res.Revision)
	}
	svc := f.service(t, f.ns+"_web")
	if img := svc.Spec.TaskTemplate.ContainerSpec.Image; img != v2 {
		t.Errorf("service image = %q, want %q", img, v2)
	}
	if svc.ID != created.ID {
		t.Errorf("service id %s → %s, want it updated in place", created.ID, svc.ID)
	}
	rev, err := LatestRevision(t.Context(), f.cli, f.owner)
	if err != nil || rev == nil || rev.Number != 2 || rev.Images[f.ns+"_web"] != v2 {
		t.Fatalf("LatestRevision = %+v, %v; want revision 2 with image %s", rev, err, v2)
	}
}

func TestApplyRefusesNamespaceWithForeignService(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	// As `docker stack deploy` leaves it: the namespace label, no skep labels.
	foreign := f.release(image, "x\n").Services[f.ns+"_web"]
	foreign.Name = f.ns + "_legacy"
	foreign.Labels = map[string]string{stack.LabelNamespace: f.ns}
	foreign.TaskTemplate.ContainerSpec.Configs, foreign.TaskTemplate.ContainerSpec.Secrets, foreign.TaskTemplate.Networks = nil, nil, nil
	if _, err := f.cli.ServiceCreate(t.Context(), foreign, swarm.ServiceCreateOptions{}); err != nil {
		t.Fatal(err)
	}

	res, err := Apply(t.Context(), f.cli, f.release(image, "listen 80\n"), f.opts(t, ResolveNever))
	var fe *ForeignError
	if !errors.As(err, &fe) {
		t.Fatalf("Apply = %v, want a *ForeignError", err)
	}
	if len(fe.Objects) != 1 || fe.Objects[0].Name != f.ns+"_legacy" || fe.Objects[0].Controller != "" {
		t.Errorf("ForeignError objects = %+v, want the unlabelled %s_legacy", fe.Objects, f.ns)
	}
	if outcome.Of(err) == outcome.Transient || len(res.Changes) != 0 {
		t.Errorf("refused apply: transient %v, changes %v; want not transient and no changes", (outcome.Of(err) == outcome.Transient), res.Changes)
	}
	if err := CheckOwnership(t.Context(), f.cli, f.owner); !errors.As(err, &fe) {
		t.Errorf("CheckOwnership = %v, want a *ForeignError", err)
	}
	if _, err := f.cli.NetworkInspect(t.Context(), f.ns+"_default", network.InspectOptions{}); err == nil {
		t.Error("refused apply created the network")
	}
	if rev, err := LatestRevision(t.Context(), f.cli, f.owner); rev != nil || err != nil {
		t.Errorf("refused apply recorded revision %+v (%v)", rev, err)
	}
}

func TestApplyRefusesReleaseOfAnotherController(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	rel := f.release(image, "listen 80\n")
	mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	if err := CheckOwnership(t.Context(), f.cli, f.owner); err != nil {
		t.Fatalf("CheckOwnership by the deploying owner = %v, want nil", err)
	}

	other := f.opts(t, ResolveNever)
	other.Owner.Controller = f.owner.Controller + "-other"
	_, err := Apply(t.Context(), f.cli, rel, other)
	var fe *ForeignError
	if !errors.As(err, &fe) {
		t.Fatalf("Apply by another controller = %v, want a *ForeignError", err)
	}
	if len(fe.Objects) != 1 || fe.Objects[0].Controller != f.owner.Controller {
		t.Errorf("ForeignError objects = %+v, want the service owned by controller %s", fe.Objects, f.owner.Controller)
	}
	if rev, _ := LatestRevision(t.Context(), f.cli, other.Owner); rev != nil {
		t.Errorf("other controller recorded revision %d", rev.Number)
	}
}

// registryDigest asks the registry itself, not the Engine, for the digest
// of host/repo:tag, with a plain distribution-API HEAD request.
func registryDigest(t *testing.T, ref string) string {
	t.Helper()
	host, rest, _ := strings.Cut(ref, "/")
	repo, tag, _ := strings.Cut(rest, ":")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, "http://"+host+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("registry HEAD %s: %v", ref, err)
	}
	resp.Body.Close()
	d := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(d, "sha256:") {
		t.Fatalf("registry HEAD %s: status %d, digest %q", ref, resp.StatusCode, d)
	}
	return d
}

func TestResolveImagePolicies(t *testing.T) {
	cli := harness.RequireSwarm(t)
	reg := harness.StartRegistry(t)
	v1 := harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"})
	v2 := harness.TestImage(t, cli, harness.ImageOptions{Version: "v2"})

	for _, tc := range []struct {
		name string
		// first applies the tag with content v1 under policy first; the tag
		// then moves to v2 and second applies the same release again.
		first, second ResolveImage
		wantFirst     string // "v1" pinned digest of v1, "tag" as written
		wantSecond    string // "v1", "v2" or "tag"
		wantUpdate    bool
	}{
		{name: "always pins the digest and follows a moved tag", first: ResolveAlways, second: ResolveAlways, wantFirst: "v1", wantSecond: "v2", wantUpdate: true},
		{name: "changed pins on create and keeps the digest for the same tag", first: ResolveChanged, second: ResolveChanged, wantFirst: "v1", wantSecond: "v1"},
		{name: "never deploys the tag as written", first: ResolveNever, second: ResolveNever, wantFirst: "tag", wantSecond: "tag"},
		{name: "never after always drops the digest", first: ResolveAlways, second: ResolveNever, wantFirst: "v1", wantSecond: "tag", wantUpdate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			repo := "apply/" + f.ns
			ref := reg.Push(t, cli, v1, repo, "stable")
			images := map[string]string{"tag": ref, "v1": ref + "@" + registryDigest(t, ref)}
			rel := f.release(ref, "listen 80\n")

			mustApply(t, rel, f.cli, f.opts(t, tc.first))
			before := f.settled(t, f.ns+"_web")
			if got := before.Spec.TaskTemplate.ContainerSpec.Image; got != images[tc.wantFirst] {
				t.Fatalf("first apply (%s): image %q, want %q", tc.first, got, images[tc.wantFirst])
			}
			if tc.wantFirst == "v1" && (before.Spec.TaskTemplate.Placement == nil || len(before.Spec.TaskTemplate.Placement.Platforms) == 0) {
				t.Errorf("pinned image without platforms, want them from the registry as docker stack deploy sets them")
			}

			reg.Push(t, cli, v2, repo, "stable")
			images["v2"] = ref + "@" + registryDigest(t, ref)
			res := mustApply(t, rel, f.cli, f.opts(t, tc.second))
			after := f.service(t, f.ns+"_web")
			if got := after.Spec.TaskTemplate.ContainerSpec.Image; got != images[tc.wantSecond] {
				t.Errorf("second apply (%s): image %q, want %q", tc.second, got, images[tc.wantSecond])
			}
			if updated := actions(res)["service "+f.ns+"_web"] == Updated; updated != tc.wantUpdate {
				t.Errorf("second apply updated the service: %v, want %v", updated, tc.wantUpdate)
			}
			if !tc.wantUpdate && !unwritten(before, after) {
				t.Errorf("service %+v → %+v, want no write", before, after)
			}
		})
	}
}

func TestResolveImageKeepsTagWhenRegistryIsGone(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/apply/gone:v1"
	if err := harness.PushImage(t.Context(), f.cli, harness.TestImage(t, f.cli, harness.ImageOptions{}), ref); err != nil {
		t.Fatal(err)
	}
	rel := f.release(ref, "listen 80\n")
	mustApply(t, rel, f.cli, f.opts(t, ResolveAlways))
	pinned := f.settled(t, f.ns+"_web")
	if !strings.HasPrefix(pinned.Spec.TaskTemplate.ContainerSpec.Image, ref+"@sha256:") {
		t.Fatalf("image = %q, want %s pinned to a digest", pinned.Spec.TaskTemplate.ContainerSpec.Image, ref)
	}
	srv.Close()

	// A service already running the tag keeps its digest: no write only
	// because the registry is away.
	// A new service gets the tag as written.
	api := rel.Services[f.ns+"_web"]
	api.Name = f.ns + "_api"
	rel.Services[f.ns+"_api"] = api
	res, err := Apply(t.Context(), f.cli, rel, f.opts(t, ResolveAlways))
	if err != nil {
		t.Fatalf("Apply with the registry gone = %v, want success", err)
	}
	if got := actions(res)["service "+f.ns+"_web"]; got != Unchanged {
		t.Errorf("running service: %q, want unchanged", got)
	}
	if after := f.service(t, f.ns+"_web"); !unwritten(pinned, after) {
		t.Errorf("running service %+v → %+v, want no write", pinned, after)
	}
	if got := f.service(t, f.ns+"_api").Spec.TaskTemplate.ContainerSpec.Image; got != ref {
		t.Errorf("new service image = %q, want the tag %q as written", got, ref)
	}
}

func TestApplyDeletesRotatedConfigsButNothingUnowned(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	unowned := f.ns + "_conf-unowned"
	if _, err := f.cli.ConfigCreate(t.Context(), swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: unowned, Labels: map[string]string{stack.LabelNamespace: f.ns}},
		Data:        []byte("not skep's"),
	}); err != nil {
		t.Fatal(err)
	}
	var names []string
	eng := &wholeListCounter{Client: f.cli}
	for _, data := range []string{"one\n", "two\n", "three\n"} {
		rel := f.release(image, data)
		names = append(names, sortedKeys(rel.Configs)[0])
		mustApply(t, rel, eng, f.opts(t, ResolveNever))
		f.settled(t, f.ns+"_web")
	}
	// Uses are looked for among the owner's services: every service of
	// the swarm, on every apply, is 25 MB an apply at 10,000 services.
	if n := eng.unfiltered.Load(); n != 0 {
		t.Errorf("three applies listed every service of the swarm %d times, want none", n)
	}
	list, err := f.cli.ConfigList(t.Context(), swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", f.ns+"_conf-"))})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list {
		got = append(got, c.Spec.Name)
	}
	slices.Sort(got)
	// The first version is gone; the second stays while the service's
	// previous spec (Swarm's rollback target) uses it.
	want := []string{names[1], names[2], unowned}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("configs after three rotations (-want +got):\n%s", diff)
	}
	revs, err := Revisions(t.Context(), f.cli, f.owner)
	if err != nil || len(revs) != 3 {
		t.Errorf("Revisions = %d, %v; want all 3 kept", len(revs), err)
	}
}

func TestRevisionsKeepTheNewestTen(t *testing.T) {
	f := newFixture(t)
	for i := 1; i <= 12; i++ {
		conf := fmt.Sprintf("%s_conf-%d", f.ns, i)
		rel := stack.Release{Name: f.ns, Configs: map[string]swarm.ConfigSpec{conf: {Data: []byte(fmt.Sprint(i))}}}
		res := mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
		if res.Revision != i {
			t.Fatalf("apply %d wrote revision %d", i, res.Revision)
		}
	}
	revs, err := Revisions(t.Context(), f.cli, f.owner)
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int
	for _, r := range revs {
		numbers = append(numbers, r.Number)
	}
	if diff := cmp.Diff([]int{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, numbers); diff != "" {
		t.Errorf("revisions kept (-want +got):\n%s", diff)
	}
	latest, err := LatestRevision(t.Context(), f.cli, f.owner)
	if err != nil || latest == nil || latest.Number != 12 {
		t.Fatalf("LatestRevision = %+v, %v; want 12", latest, err)
	}
	if _, ok := latest.Release.Configs[f.ns+"_conf-12"]; !ok {
		t.Errorf("revision 12 holds configs %v, want %s_conf-12", sortedKeys(latest.Release.Configs), f.ns)
	}
}

// wholeListCounter counts the lists of every service, and of every
// network, of the swarm.
type wholeListCounter struct {
	*client.Client
	unfiltered, unfilteredNetworks atomic.Int32
}

func (c *wholeListCounter) ServiceList(ctx context.Context, o swarm.ServiceListOptions) ([]swarm.Service, error) {
	if o.Filters.Len() == 0 {
		c.unfiltered.Add(1)
	}
	return c.Client.ServiceList(ctx, o)
}

func (c *wholeListCounter) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	if o.Filters.Len() == 0 {
		c.unfilteredNetworks.Add(1)
	}
	return c.Client.NetworkList(ctx, o)
}

// racingEngine writes to the service behind Apply's back just before
// Apply's first update, so the Engine answers "update out of sequence".
type racingEngine struct {
	*client.Client
	raced bool
}

func (e *racingEngine) ServiceUpdate(ctx context.Context, id string, v swarm.Version, spec swarm.ServiceSpec, o swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error) {
	if !e.raced {
		e.raced = true
		cur, _, err := e.Client.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
		if err != nil {
			return swarm.ServiceUpdateResponse{}, err
		}
		cur.Spec.Labels["racer"] = "was here"
		if _, err := e.Client.ServiceUpdate(ctx, id, cur.Version, cur.Spec, swarm.ServiceUpdateOptions{}); err != nil {
			return swarm.ServiceUpdateResponse{}, err
		}
	}
	return e.Client.ServiceUpdate(ctx, id, v, spec, o)
}

func TestApplyRetriesUpdateOnVersionConflict(t *testing.T) {
	f := newFixture(t)
	v1 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v1"})
	v2 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v2"})
	mustApply(t, f.release(v1, "listen 80\n"), f.cli, f.opts(t, ResolveNever))
	eng := &racingEngine{Client: f.cli}
	res := mustApply(t, f.release(v2, "listen 80\n"), eng, f.opts(t, ResolveNever))
	if !eng.raced || actions(res)["service "+f.ns+"_web"] != Updated {
		t.Fatalf("raced %v, service %q; want a raced update that succeeded", eng.raced, actions(res)["service "+f.ns+"_web"])
	}
	svc := f.service(t, f.ns+"_web")
	if img := svc.Spec.TaskTemplate.ContainerSpec.Image; img != v2 {
		t.Errorf("image after retried update = %q, want %q", img, v2)
	}
	if _, ok := svc.Spec.Labels["racer"]; ok {
		t.Errorf("labels %v keep the racer's label, want the desired spec written over it", svc.Spec.Labels)
	}
}

func TestApplyRestoresOutOfBandChange(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	rel := f.release(image, "listen 80\n")
	mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	cur := f.settled(t, f.ns+"_web")
	three := uint64(3)
	cur.Spec.Mode.Replicated.Replicas = &three // docker service scale keeps every label
	if _, err := f.cli.ServiceUpdate(t.Context(), cur.ID, cur.Version, cur.Spec, swarm.ServiceUpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	if got := actions(res)["service "+f.ns+"_web"]; got != Updated {
		t.Errorf("service scaled out of band: %q, want updated", got)
	}
	if r := *f.service(t, f.ns+"_web").Spec.Mode.Replicated.Replicas; r != 1 {
		t.Errorf("replicas = %d, want the release's 1", r)
	}
	if res.Revision != 2 {
		t.Errorf("Result.Revision = %d, want 2 (something changed)", res.Revision)
	}
}

func TestApplyReportsNetworkThatDiffersFromRelease(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	rel := f.release(image, "listen 80\n")
	mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	n := rel.Networks[f.ns+"_default"]
	n.Attachable = true
	rel.Networks[f.ns+"_default"] = n
	res := mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	for _, c := range res.Changes {
		if c.Kind == KindNetwork {
			if c.Action != Unchanged || !strings.Contains(c.Note, "attachable") {
				t.Errorf("network change = %+v, want unchanged with a note naming attachable", c)
			}
			return
		}
	}
	t.Error("no network in the result")
}

func TestApplyStallsOnMissingReference(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drop    func(*stack.Release)
		missing string
	}{
		{name: "secret in neither release nor swarm", drop: func(r *stack.Release) { r.Secrets = nil }, missing: "token-1"},
		{name: "config in neither release nor swarm", drop: func(r *stack.Release) { r.Configs = nil }, missing: "_conf-"},
		{name: "network in neither release nor swarm", drop: func(r *stack.Release) { r.Networks = nil }, missing: "_default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rel := f.release(harness.TestImage(t, f.cli, harness.ImageOptions{}), "listen 80\n")
			tc.drop(&rel)
			res, err := Apply(t.Context(), f.cli, rel, f.opts(t, ResolveNever))
			if outcome.Of(err) != outcome.Stalled || outcome.Of(err) == outcome.Transient {
				t.Fatalf("Apply = %v, want a stalled error", err)
			}
			if !strings.Contains(err.Error(), tc.missing) {
				t.Errorf("error %q does not name the missing %q", err, tc.missing)
			}
			for _, c := range res.Changes {
				if c.Kind == KindService || c.Kind == KindRevision {
					t.Errorf("stalled apply still wrote %s %s", c.Kind, c.Name)
				}
			}
		})
	}
}

func TestApplyStallsOnSpecTheEngineRejects(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	rel := f.release(image, "listen 80\n")
	svc := rel.Services[f.ns+"_web"]
	svc.TaskTemplate.ContainerSpec.Mounts = nil
	svc.EndpointSpec = &swarm.EndpointSpec{Mode: "bogus"}
	rel.Services[f.ns+"_web"] = svc
	_, err := Apply(t.Context(), f.cli, rel, f.opts(t, ResolveNever))
	if outcome.Of(err) != outcome.Stalled {
		t.Fatalf("Apply of a spec the Engine rejects = %v, want a stalled error", err)
	}
}

func TestCorrectionRestoresOutOfBandChangeWithoutANewRevision(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	rel := f.release(image, "listen 80\n")
	mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	cur := f.settled(t, f.ns+"_web")
	two := uint64(2)
	cur.Spec.Mode.Replicated.Replicas = &two
	if _, err := f.cli.ServiceUpdate(t.Context(), cur.ID, cur.Version, cur.Spec, swarm.ServiceUpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := f.opts(t, ResolveNever)
	opts.Correction = true
	res := mustApply(t, rel, f.cli, opts)
	if got := actions(res)["service "+f.ns+"_web"]; got != Updated {
		t.Errorf("corrected service: %q, want updated", got)
	}
	if r := *f.service(t, f.ns+"_web").Spec.Mode.Replicated.Replicas; r != 1 {
		t.Errorf("replicas = %d, want the release's 1", r)
	}
	revs, err := Revisions(t.Context(), f.cli, f.owner)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 0 || len(revs) != 1 {
		t.Errorf("a correction wrote revision %d (%d recorded), want none beyond revision 1", res.Revision, len(revs))
	}
}

// The apply of an earlier wave writes its services but records nothing:
// the revision comes with the apply of the whole release.
func TestApplyOfAWaveWritesItsServicesButNoRevision(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	rel := f.release(image, "listen 80\n")
	opts := f.opts(t, ResolveNever)
	opts.Wave = true
	res := mustApply(t, rel, f.cli, opts)
	if got := actions(res)["service "+f.ns+"_web"]; got != Created || res.Revision != 0 {
		t.Errorf("wave apply: service %s, revision %d; want created and no revision", got, res.Revision)
	}
	if revs, err := Revisions(t.Context(), f.cli, f.owner); err != nil || len(revs) != 0 {
		t.Errorf("Revisions after a wave = %d, %v; want none", len(revs), err)
	}
	opts.Wave = false
	res = mustApply(t, rel, f.cli, opts)
	if got := actions(res)["service "+f.ns+"_web"]; got != Unchanged || res.Revision != 1 {
		t.Errorf("apply of the whole release: service %s, revision %d; want unchanged and revision 1", got, res.Revision)
	}
}

// TestApplyReadsOnlyTheNetworksItUses: an apply looks up the networks its
// release declares and attaches to, by name or by id, and never lists
// every network of the swarm (a thousand of them per apply in flight at a
// thousand releases). A network whose name only starts like one it uses
// is not taken for it.
func TestApplyReadsOnlyTheNetworksItUses(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	// Labelled with the namespace, so the fixture's cleanup removes them
	// once the service that uses them is gone (a name filter matches a
	// swarm network only by its whole name once no task here uses it).
	create := func(name string) string {
		resp, err := f.cli.NetworkCreate(t.Context(), name, network.CreateOptions{Driver: "overlay",
			Labels: map[string]string{stack.LabelNamespace: f.ns}})
		if err != nil {
			t.Fatalf("create network %s: %v", name, err)
		}
		return resp.ID
	}
	ext, byID := create(f.ns+"_x-ext"), create(f.ns+"_x-byid")
	create(f.ns + "_x-ext-lookalike")
	rel := f.release(image, "listen 80\n")
	svc := rel.Services[f.ns+"_web"]
	svc.TaskTemplate.Networks = append(svc.TaskTemplate.Networks,
		swarm.NetworkAttachmentConfig{Target: f.ns + "_x-ext"}, swarm.NetworkAttachmentConfig{Target: byID})
	rel.Services[f.ns+"_web"] = svc

	spy := &wholeListCounter{Client: f.cli}
	res := mustApply(t, rel, spy, f.opts(t, ResolveNever))
	if n := spy.unfilteredNetworks.Load(); n != 0 {
		t.Errorf("apply listed every network of the swarm %d times, want only the ones it uses", n)
	}
	own := ""
	for _, c := range res.Changes {
		if c.Kind == KindNetwork && c.Name == f.ns+"_default" {
			own = c.ID
		}
	}
	var got []string
	for _, a := range f.service(t, f.ns+"_web").Spec.TaskTemplate.Networks {
		got = append(got, a.Target)
	}
	if want := []string{own, ext, byID}; own == "" || !slices.Equal(got, want) {
		t.Errorf("service attached to %v, want %v (its own network, the external one by name, the one named by id)", got, want)
	}
}

// gatheringEngine holds each of the first reads of an apply until want of
// them are in flight together, or a minute passed, and remembers the most
// that were.
type gatheringEngine struct {
	*client.Client
	want    int32
	mu      sync.Mutex
	now     int32 // reads in flight
	most    int32
	gather  chan struct{} // closed once want reads are in flight
	writing atomic.Bool
}

func (g *gatheringEngine) read(f func()) {
	if g.writing.Load() {
		f()
		return
	}
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	if g.now == g.want {
		close(g.gather)
	}
	g.mu.Unlock()
	select {
	case <-g.gather:
	case <-time.After(time.Minute): // one after the other: never gathered
	}
	f()
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
}

func (g *gatheringEngine) ServiceList(ctx context.Context, o swarm.ServiceListOptions) (out []swarm.Service, err error) {
	g.read(func() { out, err = g.Client.ServiceList(ctx, o) })
	return out, err
}

func (g *gatheringEngine) ConfigList(ctx context.Context, o swarm.ConfigListOptions) (out []swarm.Config, err error) {
	g.read(func() { out, err = g.Client.ConfigList(ctx, o) })
	return out, err
}

func (g *gatheringEngine) NetworkList(ctx context.Context, o network.ListOptions) (out []network.Summary, err error) {
	g.read(func() { out, err = g.Client.NetworkList(ctx, o) })
	return out, err
}

func (g *gatheringEngine) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	g.writing.Store(true)
	return g.Client.NetworkCreate(ctx, name, o)
}

// The reads an apply makes before its first write (the revisions, the
// namespace's services by label and by name, the networks) are sent
// together: one round trip to a busy manager, not four.
func TestApplySendsItsFirstReadsTogether(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	eng := &gatheringEngine{Client: f.cli, want: 4, gather: make(chan struct{})}
	res := mustApply(t, f.release(image, "listen 80\n"), eng, f.opts(t, ResolveNever))
	if eng.most != 4 {
		t.Errorf("at most %d of the first 4 reads were in flight together, want 4", eng.most)
	}
	if got := actions(res)["service "+f.ns+"_web"]; got != Created {
		t.Errorf("service %q, want created", got)
	}
}

// digestGatheringEngine is a gatheringEngine whose digest look-ups count
// among the first reads.
type digestGatheringEngine struct{ *gatheringEngine }

func (g digestGatheringEngine) DistributionInspect(ctx context.Context, image, auth string) (out dockerregistry.DistributionInspect, err error) {
	g.read(func() { out, err = g.Client.DistributionInspect(ctx, image, auth) })
	return out, err
}

// Under ResolveAlways the registry is asked for the release's images
// while the first reads are out, not one round trip after them: a
// webhook's change of an environment variable waited for both in turn.
func TestApplyAsksForDigestsWithItsFirstReads(t *testing.T) {
	f := newFixture(t)
	reg := harness.StartRegistry(t)
	ref := reg.Push(t, f.cli, harness.TestImage(t, f.cli, harness.ImageOptions{}), "apply/"+f.ns, "stable")
	eng := digestGatheringEngine{&gatheringEngine{Client: f.cli, want: 5, gather: make(chan struct{})}}
	opts := f.opts(t, ResolveAlways)
	opts.Digests = NewDigestCache(0, 0)
	res := mustApply(t, f.release(ref, "listen 80\n"), eng, opts)
	if eng.most != 5 {
		t.Errorf("at most %d of the first 4 reads and the digest look-up were in flight together, want 5", eng.most)
	}
	web := f.service(t, f.ns+"_web")
	if got, want := web.Spec.TaskTemplate.ContainerSpec.Image, ref+"@"+registryDigest(t, ref); got != want || actions(res)["service "+f.ns+"_web"] != Created {
		t.Errorf("service created with image %q, want %q", got, want)
	}
}
