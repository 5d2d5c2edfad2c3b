package stack

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
)

// FuzzConvert converts whatever docker/cli's loader accepts. Property:
// Convert never panics, and a release it returns names every service and
// network inside its namespace and every config and secret within Swarm's
// name limit.
func FuzzConvert(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fixtureDir, "*", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) < 10 {
		f.Fatalf("found %d seed compose files, want at least 10", len(seeds))
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
		cfg, ok := loadQuietly(data)
		if !ok {
			return
		}
		files := map[string][]byte{}
		for _, c := range cfg.Configs {
			files[c.File] = []byte("config " + c.File)
		}
		for _, s := range cfg.Secrets {
			files[s.File] = []byte("secret " + s.File)
		}
		rel, err := Convert(cfg, Options{Owner: testOwner("fz"), Files: files, Allow: Allow{HostPaths: []string{"/"}}})
		if err != nil {
			return
		}
		for name, spec := range rel.Services {
			if name != spec.Name || !strings.HasPrefix(name, "fz_") {
				t.Errorf("service %q (spec name %q) is outside the namespace", name, spec.Name)
			}
		}
		for name := range rel.Configs {
			if len(name) > maxNameLength {
				t.Errorf("config name %q is longer than %d", name, maxNameLength)
			}
		}
		for name := range rel.Secrets {
			if len(name) > maxNameLength {
				t.Errorf("secret name %q is longer than %d", name, maxNameLength)
			}
		}
	})
}

// loadQuietly runs the loader on fuzz input; panics inside docker/cli's
// loader are its own (render guards against them) and not what this target
// tests.
func loadQuietly(data []byte) (cfg *composetypes.Config, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			cfg, ok = nil, false
		}
	}()
	dict, err := loader.ParseYAML(data)
	if err != nil {
		return nil, false
	}
	cfg, err = loader.Load(composetypes.ConfigDetails{
		WorkingDir:  "/repo",
		ConfigFiles: []composetypes.ConfigFile{{Filename: "compose.yaml", Config: dict}},
		Environment: map[string]string{"IMAGE": "img:1", "REPLICAS": "2", "VERSION": "v1"},
	})
	if err != nil {
		return nil, false
	}
	return cfg, true
}

// FuzzLocalVolumeBindIsRefused converts a local volume whose device is
// "." (the daemon's working directory, the node's root, once bound) with
// fuzzed mount options (driver_opts.o), seeded from
// testdata/mount-options.txt. Property: whenever the local driver would
// make the mount a bind (an option, split at commas as moby's mount
// package splits them, that is bind or rbind), Convert refuses it.
func FuzzLocalVolumeBindIsRefused(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "mount-options.txt"))
	if err != nil {
		f.Fatal(err)
	}
	seeds := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f.Add(line)
		seeds++
	}
	if seeds < 10 {
		f.Fatalf("found %d seed mount options, want at least 10", seeds)
	}
	f.Fuzz(func(t *testing.T, o string) {
		driverBinds := slices.ContainsFunc(strings.Split(o, ","), func(opt string) bool { return opt == "bind" || opt == "rbind" })
		cfg := &composetypes.Config{
			Services: []composetypes.ServiceConfig{{Name: "web", Image: "busybox",
				Volumes: []composetypes.ServiceVolumeConfig{{Type: "volume", Source: "data", Target: "/d"}}}},
			Volumes: map[string]composetypes.VolumeConfig{"data": {DriverOpts: map[string]string{"type": "none", "o": o, "device": "."}}},
		}
		_, err := Convert(cfg, Options{Owner: testOwner("fz")})
		if driverBinds && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("o %q binds the node's root, and Convert() = %v, want a refusal", o, err)
		}
	})
}
