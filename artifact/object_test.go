package artifact

import (
	"testing"
)

// The seed's rules for one artifact, case by case: the image condition,
// suspension, an empty desired version and equal versions.
func TestVersionAndDriftFollowTheImageGate(t *testing.T) {
	web := func(desired, current string, cond Condition, suspend bool) Object {
		return Object{Entry: Entry{Kind: Service, Name: "web", Image: "registry.example.org/web", Deploy: Deploy{Release: desired, Suspend: suspend}},
			Desired: desired, Current: current, Condition: cond}
	}
	for _, tc := range []struct {
		name        string
		obj         Object
		version     string
		readyDrift  bool
		waitingDrft bool
	}{
		{"a pushed new version is used and is a ready drift", web("v0.5.0", "v0.4.0", Pushed, false), "v0.5.0", true, true},
		{"an unpushed new version keeps the running one and waits", web("v0.5.0", "v0.4.0", Waiting, false), "v0.4.0", false, true},
		{"a registry that failed keeps the running one and waits", web("v0.5.0", "v0.4.0", Failed, false), "v0.4.0", false, true},
		{"a suspended artifact keeps the running one even when pushed", web("v0.5.0", "v0.4.0", Pushed, true), "v0.4.0", false, false},
		{"a suspended artifact keeps the running one when not pushed", web("v0.5.0", "v0.4.0", Waiting, true), "v0.4.0", false, false},
		{"equal versions are no drift", web("v0.4.0", "v0.4.0", Pushed, false), "v0.4.0", false, false},
		{"equal versions are no drift even unchecked", web("v0.4.0", "v0.4.0", "", false), "v0.4.0", false, false},
		{"an empty desired version is no drift and keeps the running one", web("", "v0.4.0", Pushed, false), "v0.4.0", false, false},
		{"nothing running and a pushed version: a first deploy", web("v0.1.0", "", Pushed, false), "v0.1.0", true, true},
		{"nothing running and nothing pushed: no version at all", web("v0.1.0", "", Waiting, false), "", false, true},
		{"nothing running and suspended: no version at all", web("v0.1.0", "", Pushed, true), "", false, false},
		{"an unchecked condition never uses the desired version", web("v0.5.0", "v0.4.0", "", false), "v0.4.0", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.obj.Version(); got != tc.version {
				t.Errorf("Version() = %q, want %q", got, tc.version)
			}
			if got := tc.obj.Drift(true); got != tc.readyDrift {
				t.Errorf("Drift(ready) = %t, want %t", got, tc.readyDrift)
			}
			if got := tc.obj.Drift(false); got != tc.waitingDrft {
				t.Errorf("Drift(waiting) = %t, want %t", got, tc.waitingDrft)
			}
			if tc.obj.Drift(true) && !tc.obj.Drift(false) {
				t.Error("a ready drift must also be a waiting drift")
			}
		})
	}
}

func TestReferencePinsOnlyTheDesiredDigest(t *testing.T) {
	o := Object{Entry: Entry{Kind: Service, Name: "web", Image: "r.example.org/web"}, Desired: "v2", Current: "v1", Condition: Pushed, Digest: "sha256:abc"}
	if got, want := o.Reference(), "r.example.org/web:v2@sha256:abc"; got != want {
		t.Errorf("Reference() = %q, want %q", got, want)
	}
	o.Condition = Waiting
	if got, want := o.Reference(), "r.example.org/web:v1"; got != want {
		t.Errorf("Reference() while waiting = %q, want %q (the running tag, no digest)", got, want)
	}
	o.CurrentDigest = "sha256:def"
	if got, want := o.Reference(), "r.example.org/web:v1@sha256:def"; got != want {
		t.Errorf("Reference() while waiting on a pinned running image = %q, want %q", got, want)
	}
	o.CurrentDigest = ""
	o.Current = ""
	if got := o.Reference(); got != "" {
		t.Errorf("Reference() with no version = %q, want empty", got)
	}
}

func TestNamesBecomeVariablesAndParameters(t *testing.T) {
	for _, tc := range []struct{ name, variable, parameter string }{
		{"specta", "SPECTA", "SpectaVersion"},
		{"infrastructure", "INFRASTRUCTURE", "InfrastructureVersion"},
		{"web-api", "WEB_API", "WebApiVersion"},
		{"web_api.v2", "WEB_API_V2", "WebApiV2Version"},
	} {
		if got := Variable(tc.name); got != tc.variable {
			t.Errorf("Variable(%q) = %q, want %q", tc.name, got, tc.variable)
		}
		if got := Parameter(tc.name); got != tc.parameter {
			t.Errorf("Parameter(%q) = %q, want %q", tc.name, got, tc.parameter)
		}
	}
}

func TestBranchTagFillsTheTemplate(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct{ template, want string }{
		{"", commit},
		{"{short}", "0123456789ab"},
		{"sha-{short}", "sha-0123456789ab"},
		{"{branch}-{short}", "feature-login-0123456789ab"},
	} {
		if got := BranchTag(tc.template, "feature/login", commit); got != tc.want {
			t.Errorf("BranchTag(%q) = %q, want %q", tc.template, got, tc.want)
		}
	}
}
