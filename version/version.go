// Package version reports which build of Skep is running.
//
// The release process stamps Version and Commit with -ldflags -X; an
// unstamped build (go install, go test) falls back to the module and VCS data
// the Go toolchain embeds. It must never fail or panic: an unknown value
// reads "unknown".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped at build time by the Makefile:
//
//	-ldflags "-X github.com/skep-cd/skep/version.Version=v0.1.0 -X github.com/skep-cd/skep/version.Commit=abc1234"
var (
	Version = ""
	Commit  = ""
)

// Info is what one build knows about itself.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// Get returns the build's stamped values, or what debug.ReadBuildInfo
// recorded when the binary was not stamped.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			info.Commit = vcsRevision(bi.Settings)
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

func vcsRevision(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// String renders the line `skep version` prints:
// "skep <version> (<commit>, <go version>)".
func (i Info) String() string {
	return fmt.Sprintf("skep %s (%s, %s)", i.Version, i.Commit, i.GoVersion)
}
