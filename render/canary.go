package render

import (
	"fmt"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"

	"github.com/skep-cd/skep/canary"
)

// canaries reads each service's canary.Key, adding an error located at
// the field for every problem of its strategy, and for a strategy on a
// hook, on a service that is not replicated, beside another service's
// strategy, or whose job metric names no analysis hook.
func (r *renderer) canaries(cfg *composetypes.Config, hooks map[string]Hook, errs []error) (map[string]canary.Strategy, []error) {
	var out map[string]canary.Strategy
	first := ""
	fail := func(svc string, path []string, err error) {
		field := "services." + svc + "." + canary.Key
		file, line := r.findNearest(field, path)
		shown := field
		if f := (canary.Problem{Path: path}).Field(); f != "" {
			shown += "." + f
		}
		errs = append(errs, &Error{File: file, Line: line, Field: shown, Err: err})
	}
	for _, svc := range cfg.Services {
		v, ok := svc.Extras[canary.Key]
		if !ok {
			continue
		}
		s, problems := canary.Parse(v)
		for _, p := range problems {
			fail(svc.Name, p.Path, p.Err)
		}
		switch mode := svc.Deploy.Mode; {
		case hooks[svc.Name].Phase != "":
			fail(svc.Name, nil, fmt.Errorf("a hook (%s) has no canary; remove one of the two", HookKey))
			continue
		case mode != "" && mode != "replicated":
			fail(svc.Name, nil, fmt.Errorf("a canary needs a replicated service, not deploy.mode %s", mode))
			continue
		case first != "":
			fail(svc.Name, nil, fmt.Errorf("service %s has a canary already; a release canaries one service at a time", first))
			continue
		}
		first = svc.Name
		checkJobs(svc.Name, s, hooks, fail)
		if len(problems) == 0 {
			if out == nil {
				out = map[string]canary.Strategy{}
			}
			out[svc.Name] = s
		}
	}
	return out, errs
}

// checkJobs fails each job metric of s that names no analysis hook.
func checkJobs(svc string, s canary.Strategy, hooks map[string]Hook, fail func(string, []string, error)) {
	for i, st := range s.Steps {
		if st.Analysis == nil {
			continue
		}
		for j, m := range st.Analysis.Metrics {
			if m.Job == "" || hooks[m.Job].Phase == HookAnalysis {
				continue
			}
			fail(svc, []string{"steps", fmt.Sprint(i), "analysis", "metrics", fmt.Sprint(j), "job"},
				fmt.Errorf("%s is no service marked %s: %s", m.Job, HookKey, HookAnalysis))
		}
	}
}

// findNearest locates base's path in the files, or the nearest field
// above it that a file spells (a value from interpolation, or a list
// item written inline).
func (r *renderer) findNearest(base string, path []string) (string, int) {
	for n := len(path); n >= 0; n-- {
		field := base
		if n > 0 {
			field += "." + strings.Join(path[:n], ".")
		}
		if file, line := r.find(field); file != "" {
			return file, line
		}
	}
	return r.find(strings.TrimSuffix(base, "."+canary.Key))
}
