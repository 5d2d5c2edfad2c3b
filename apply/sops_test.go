package apply

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/stack"
)

// sopsRelease renders compose with a .env holding dotenv, encrypted to a
// new age key with sops.Encrypt (the sops tool's format), and converts it
// as the controller does.
func sopsRelease(t *testing.T, compose, dotenv string) stack.Release {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := sops.ParseKeys(strings.NewReader(id.String()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := sops.Encrypt(".env", []byte(dotenv), id.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"compose.yaml": []byte(compose), ".env": enc} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := render.Compose(t.Context(), render.Input{Root: dir, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	owner := stack.Owner{Controller: "c1", Application: "web", Release: "shop"}
	rel, err := stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files, Masked: doc.Masked})
	if err != nil {
		t.Fatal(err)
	}
	rel.Sensitive = doc.Sensitive
	return rel
}

// recorded is rel as a revision stores it and the next plan reads it back.
func recorded(t *testing.T, rel stack.Release) stack.Release {
	t.Helper()
	rev := sampleRevision()
	rev.Release = RedactSecrets(rel)
	data, err := encodeRevision(rev)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeRevision(data)
	if err != nil {
		t.Fatal(err)
	}
	return back.Release
}

const revCompose = `services:
  web:
    image: nginx:1.27
    labels: {tier: "1", build: "rev-${REV}"}
    environment: {REV: "${REV}", PLAIN: "1"}
`

// A value decrypted from a SOPS .env is masked in the fields it came to,
// and only there: the revision records the image that was deployed, and
// the next plan shows no change that did not happen.
func TestRevisionOfADecryptedValueRecordsWhatWasDeployed(t *testing.T) {
	first := sopsRelease(t, revCompose, "REV=1\n")
	rev := recorded(t, first)
	c := rev.Services["shop_web"].TaskTemplate.ContainerSpec
	if c.Image != "nginx:1.27" {
		t.Errorf("recorded image = %q, want nginx:1.27", c.Image)
	}
	m := sops.MaskOf("1")
	if want := []string{"PLAIN=1", "REV=" + m}; !slices.Equal(c.Env, want) {
		t.Errorf("recorded env = %q, want %q", c.Env, want)
	}
	if got := c.Labels; got["tier"] != "1" || got["build"] != "rev-"+m {
		t.Errorf("recorded labels tier=%q build=%q, want 1 and rev-%s", got["tier"], got["build"], m)
	}

	tests := []struct {
		name, dotenv string
		want         []string // the changed fields' paths
	}{
		{"the same value plans no change", "REV=1\n", nil},
		{"a new value changes only the fields made from it", "REV=2\n", []string{`TaskTemplate.ContainerSpec.Labels["build"]`, `TaskTemplate.ContainerSpec.Env["REV"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := sopsRelease(t, revCompose, tt.dotenv)
			p := plan.Compare(RedactSecrets(next), &rev, plan.Options{})
			var got []string
			for _, ch := range p.Changes {
				for _, f := range ch.Fields {
					got = append(got, f.Path)
					if strings.Contains(f.Old+f.New, "REV=2") || strings.Contains(f.Old+f.New, "rev-2") {
						t.Errorf("plan shows the decrypted value: %+v", f)
					}
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("plan %s (%s) changes %q, want %q", p.Action, p.Reason, got, tt.want)
			}
		})
	}
}
