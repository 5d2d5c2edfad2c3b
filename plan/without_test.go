package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithoutTakesOutWhatBothPlansChange(t *testing.T) {
	image := FieldDiff{Path: "TaskTemplate.ContainerSpec.Image", Old: `"app:v1"`, New: `"app:v2"`}
	sealedEnv := FieldDiff{Path: `TaskTemplate.ContainerSpec.Env["TOKEN"]`, Old: `"(sops:aa)"`, New: `"(sops:bb)"`}
	secretNew := Change{Kind: KindSecret, Name: "web_token-bbbbbbbbbb", Op: Create, Reason: "new"}
	secretOld := Change{Kind: KindSecret, Name: "web_token-aaaaaaaaaa", Op: Delete, Reason: "no longer declared"}
	head := Release{Name: "web", Action: Upgrade, Reason: "image and env changed", Changes: []Change{
		secretNew, secretOld,
		{Kind: KindService, Name: "web_app", Op: Update, Reason: "image and env changed", Fields: []FieldDiff{image, sealedEnv}},
	}}
	sealing := Release{Name: "web", Action: Upgrade, Reason: "env changed", Changes: []Change{
		secretNew, secretOld,
		{Kind: KindService, Name: "web_app", Op: Update, Reason: "env changed", Fields: []FieldDiff{sealedEnv}},
	}}
	for _, tc := range []struct {
		name     string
		r, other Release
		want     Release
	}{
		{name: "what sealing alone changes goes, the head's own change stays", r: head, other: sealing,
			want: Release{Name: "web", Action: Upgrade, Reason: "image changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "image changed", Fields: []FieldDiff{image}}}}},
		{name: "a plan without the other's changes is kept whole", r: head, other: Release{Name: "web", Action: Unchanged},
			want: Release{Name: "web", Action: Upgrade, Reason: "image and env changed", Changes: head.Changes}},
		{name: "nothing left is unchanged", r: sealing, other: head,
			want: Release{Name: "web", Action: Unchanged, Changes: []Change{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.Without(tc.other)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Without (-want +got):\n%s", d)
			}
		})
	}
	if len(head.Changes[2].Fields) != 2 {
		t.Error("Without changed its receiver")
	}
}
