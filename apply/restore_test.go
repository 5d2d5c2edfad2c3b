package apply

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
)

// A release rollback writes the services back as they ran before, removes
// what the failed write created, records the revision it restores again,
// and deletes no config: the one the failed write rotated in and the one
// the restored spec uses both stay.
func TestRestoreWritesServicesBackAndRecordsTheRevisionAgain(t *testing.T) {
	f := newFixture(t)
	v1 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v1"})
	v2 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v2"})
	good := f.release(v1, "listen 80\n")
	mustApply(t, good, f.cli, f.opts(t, ResolveNever))
	before := f.settled(t, f.ns+"_web")
	restored, err := LatestRevision(t.Context(), f.cli, f.owner)
	if err != nil || restored == nil {
		t.Fatalf("revision 1: %+v, %v", restored, err)
	}

	bad := f.release(v2, "listen 81\n")
	extra := bad.Services[f.ns+"_web"]
	extra.Name = f.ns + "_worker"
	bad.Services[f.ns+"_worker"] = extra
	opts := f.opts(t, ResolveNever)
	opts.Commit = "bad"
	mustApply(t, bad, f.cli, opts)
	f.settled(t, f.ns+"_web")

	spec := before.Spec
	res, err := Restore(t.Context(), f.cli, RestoreOptions{Owner: f.owner, Failed: "bad", To: *restored,
		Steps: []RestoreStep{{Service: f.ns + "_worker"}, {Service: f.ns + "_web", Spec: &spec}}})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := actions(res); got["service "+f.ns+"_worker"] != Deleted || got["service "+f.ns+"_web"] != Updated || res.Revision != 3 {
		t.Errorf("Restore did %v, revision %d; want the worker removed, web updated, revision 3", got, res.Revision)
	}
	web := f.service(t, f.ns+"_web")
	if !unchanged(web.Spec, before.Spec) || web.Spec.TaskTemplate.ContainerSpec.Image != v1 {
		t.Errorf("web runs %s, want the spec it ran before (%s)", web.Spec.TaskTemplate.ContainerSpec.Image, v1)
	}
	if _, _, err := f.cli.ServiceInspectWithRaw(t.Context(), f.ns+"_worker", swarm.ServiceInspectOptions{}); err == nil {
		t.Error("the worker the failed write created is still there")
	}
	rev, err := LatestRevision(t.Context(), f.cli, f.owner)
	if err != nil || rev == nil || rev.Number != 3 || rev.Commit != restored.Commit || rev.Restores != 1 || rev.Failed != "bad" || rev.Images[f.ns+"_web"] != v1 {
		t.Errorf("latest revision = %+v, %v; want 3 restoring 1 after bad, at %s with %s", rev, err, restored.Commit, v1)
	}
	for data := range map[string]bool{"listen 80\n": true, "listen 81\n": true} {
		if !f.hasConfig(t, data) {
			t.Errorf("the config holding %q was deleted", data)
		}
	}

	again, err := Restore(t.Context(), f.cli, RestoreOptions{Owner: f.owner, Failed: "bad", To: *restored,
		Steps: []RestoreStep{{Service: f.ns + "_web", Spec: &spec}}})
	if err != nil || actions(again)["service "+f.ns+"_web"] != Unchanged {
		t.Errorf("a second Restore = %v, %v; want web unchanged, not written again", actions(again), err)
	}
	other := f.owner
	other.Controller += "-other"
	_, err = Restore(t.Context(), f.cli, RestoreOptions{Owner: other, To: *restored, Steps: []RestoreStep{{Service: f.ns + "_web"}}})
	var foreign *ForeignError
	if !errors.As(err, &foreign) {
		t.Errorf("Restore by another owner = %v, want a ForeignError", err)
	}
}

// hasConfig reports whether an owned config of f's release holds data.
func (f *fixture) hasConfig(t *testing.T, data string) bool {
	t.Helper()
	list, err := f.cli.ConfigList(context.WithoutCancel(t.Context()), swarm.ConfigListOptions{Filters: ownerFilters(f.owner)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if string(c.Spec.Data) == data {
			return true
		}
	}
	return false
}
