package notify

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

// FuzzParseConfig holds ParseConfig to its contract on any input: it never
// panics, and returns either located problems or a configuration that
// satisfies every rule validation promises, the same on a second parse.
func FuzzParseConfig(f *testing.F) {
	seeds, err := filepath.Glob("testdata/notifications/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) == 0 {
		f.Fatal("no seeds in testdata/notifications")
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) == 0 {
			f.Fatalf("seed %s is empty", s)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("fuzz.yaml", data)
		if err != nil {
			var errs configfile.Problems
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %v is not a non-empty configfile.Problems", err)
			}
			for _, e := range errs {
				if e.File != "fuzz.yaml" || e.Message == "" {
					t.Errorf("problem without file or message: %+v", e)
				}
			}
			return
		}
		names := map[string]bool{}
		for _, n := range cfg.Notifiers {
			if btoi(n.Webhook != nil)+btoi(n.Shoutrrr != nil)+btoi(n.Forge != nil) != 1 {
				t.Errorf("notifier %q has not exactly one kind", n.Name)
			}
			if !notifierName.MatchString(n.Name) || names[n.Name] {
				t.Errorf("notifier name %q invalid or repeated", n.Name)
			}
			names[n.Name] = true
			for _, ty := range n.Match.Types {
				if !slices.Contains(Types(), ty) {
					t.Errorf("unknown type %q accepted", ty)
				}
			}
			for _, g := range append(slices.Clone(n.Match.Swarms), n.Match.Applications...) {
				if _, err := path.Match(g, ""); err != nil {
					t.Errorf("bad glob %q accepted", g)
				}
			}
			refs := []*SecretRef{}
			if n.Webhook != nil {
				refs = append(refs, &n.Webhook.URL, n.Webhook.Secret)
			}
			if n.Shoutrrr != nil {
				refs = append(refs, &n.Shoutrrr.URL)
				for _, text := range []string{n.Shoutrrr.Title, n.Shoutrrr.Template} {
					if _, err := ParseTemplate("t", text); err != nil {
						t.Errorf("template %q accepted: %v", text, err)
					}
				}
			}
			if f := n.Forge; f != nil {
				refs = append(refs, &f.Token)
				if !slices.Contains(ForgeProviders(), f.Provider) || len(f.Repositories) == 0 {
					t.Errorf("forge %q accepted with provider %q and %d repositories", n.Name, f.Provider, len(f.Repositories))
				}
				for app, repo := range f.Repositories {
					if err := CheckRepository(f.Provider, repo); err != nil {
						t.Errorf("repository %s: %q accepted: %v", app, repo, err)
					}
				}
			}
			for _, r := range refs {
				if r != nil && (r.File == "") == (r.Env == "") {
					t.Errorf("secret ref %+v names not exactly one source", *r)
				}
			}
		}
		again, err := ParseConfig("fuzz.yaml", data)
		if err != nil {
			t.Fatalf("second parse failed: %v", err)
		}
		if d := cmp.Diff(cfg, again); d != "" {
			t.Errorf("second parse differs:\n%s", d)
		}
	})
}
