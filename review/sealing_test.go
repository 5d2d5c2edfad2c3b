package review

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/reconcile"
)

// sealedPlans answers Propose with a fixed plan per commit.
type sealedPlans struct {
	Controller
	plans map[string]plan.Release
	asked []reconcile.Proposal
}

func (s *sealedPlans) Propose(_ context.Context, app appset.Application, p reconcile.Proposal) []reconcile.Proposed {
	s.asked = append(s.asked, p)
	return []reconcile.Proposed{{Release: app.Release, Result: reconcile.Result{Commit: p.Commit, Plan: s.plans[p.Commit],
		Recorded: &apply.Revision{Commit: "deployed"}}}}
}

// In a fork's sealed plan every encrypted secret and value reads as
// changed; what the head did not re-encrypt reads so in the sealed plan of
// the deployed commit too, and goes. A value the head re-encrypted stays,
// as does every change of its own.
func TestASealedPlanShowsOnlyWhatTheHeadReEncrypted(t *testing.T) {
	image := plan.FieldDiff{Path: "TaskTemplate.ContainerSpec.Image", Old: `"app:v1"`, New: `"app:v2"`}
	token := plan.FieldDiff{Path: `TaskTemplate.ContainerSpec.Env["TOKEN"]`, Old: `"(sops:11)"`, New: `"(sops:22)"`}
	tokenRef := plan.FieldDiff{Path: `TaskTemplate.ContainerSpec.Secrets["token"].SecretName`, Old: `"web_token-1111111111"`, New: `"web_token-2222222222"`}
	certRef := plan.FieldDiff{Path: `TaskTemplate.ContainerSpec.Secrets["cert"].SecretName`, Old: `"web_cert-1111111111"`, New: `"web_cert-3333333333"`}
	baseCertRef := certRef
	baseCertRef.New = `"web_cert-2222222222"`
	secret := func(name string, op plan.Op) plan.Change {
		return plan.Change{Kind: plan.KindSecret, Name: name, Op: op}
	}
	fake := &sealedPlans{plans: map[string]plan.Release{
		"head": {Name: "web", Action: plan.Upgrade, Changes: []plan.Change{
			secret("web_cert-1111111111", plan.Delete), secret("web_cert-3333333333", plan.Create),
			secret("web_token-1111111111", plan.Delete), secret("web_token-2222222222", plan.Create),
			{Kind: plan.KindService, Name: "web_app", Op: plan.Update, Fields: []plan.FieldDiff{image, token, certRef, tokenRef}}}},
		"deployed": {Name: "web", Action: plan.Upgrade, Changes: []plan.Change{
			secret("web_cert-1111111111", plan.Delete), secret("web_cert-2222222222", plan.Create),
			secret("web_token-1111111111", plan.Delete), secret("web_token-2222222222", plan.Create),
			{Kind: plan.KindService, Name: "web_app", Op: plan.Update, Fields: []plan.FieldDiff{token, baseCertRef, tokenRef}}}},
	}}
	r := &Reviewer{opts: Options{Controller: fake}}
	app := appset.Application{Name: "web", Release: "web"}
	got := r.withoutSealing(t.Context(), app, fake.Propose(t.Context(), app, reconcile.Proposal{Commit: "head", Sealed: true}))
	want := []plan.Change{
		secret("web_cert-1111111111", plan.Delete), secret("web_cert-3333333333", plan.Create),
		{Kind: plan.KindService, Name: "web_app", Op: plan.Update, Reason: "image and secrets changed", Fields: []plan.FieldDiff{image, certRef}},
	}
	if d := cmp.Diff(want, got[0].Result.Plan.Changes); d != "" {
		t.Errorf("sealed plan (-want +got):\n%s", d)
	}
	if names := rotated(got[0].Result.Plan); !cmp.Equal(names, []string{"web_cert"}) {
		t.Errorf("rotated = %q, want the re-encrypted secret only", names)
	}
	if len(fake.asked) != 2 || !fake.asked[1].Sealed || fake.asked[1].Commit != "deployed" {
		t.Errorf("proposals = %+v, want the head's and the deployed commit's, both sealed", fake.asked)
	}
}
