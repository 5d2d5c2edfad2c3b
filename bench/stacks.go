package bench

import (
	"fmt"
	"strings"

	"github.com/skep-cd/skep/harness"
)

// app is one generated application: its stack under Skep and, for the 20
// application set, a twin stack deployed with `docker stack deploy`.
type app struct {
	name     string   // the application's name in the app set
	release  string   // its stack under Skep
	docker   string   // its twin stack under `docker stack deploy`, or ""
	services []string // service names within the stack
	replicas int
	path     string // directory of compose.yaml in the repository; "" is the root
	interval string // syncPolicy.interval
	// resolveNever sets resolveImage: never; otherwise the default applies.
	resolveNever bool
	// noHealthcheck turns off the test image's 2-second HEALTHCHECK: at a
	// hundred services its execs alone would load two cores.
	noHealthcheck bool
	// calmHealthcheck runs the test image's check at Docker's default
	// interval, 30 s, with a 10 s timeout, instead of every 2 s: a check is
	// an exec, which costs about a third of a CPU second on this machine,
	// and the 60 containers of the 20-application part (Skep's and docker
	// stack deploy's) kept the load near 30 at 2 s, and near 20 at 5 s
	// (docs/performance.md). Health waits stay: a task counts as running
	// once its first check passed.
	calmHealthcheck bool
	repoURL         string
	repo            *harness.Repo // the repository, when the application has its own
}

// compose is a's compose file at revision rev: rev goes into an environment
// variable of "web", so each new rev is a spec update of that one service.
// Other services keep BENCH_REV at 0 and never change.
func compose(a app, image string, rev int) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for _, s := range a.services {
		r := 0
		if s == "web" {
			r = rev
		}
		// dnsrr: this kernel has no IPVS, so a virtual IP would not route.
		fmt.Fprintf(&b, "  %s:\n    image: %s\n    environment: {BENCH_REV: \"%d\"}\n    deploy: {endpoint_mode: dnsrr, replicas: %d}\n",
			s, image, r, a.replicas)
		switch {
		case a.noHealthcheck:
			b.WriteString("    healthcheck: {disable: true}\n")
		case a.calmHealthcheck:
			b.WriteString("    healthcheck: {interval: 30s, timeout: 10s, retries: 3}\n")
		}
	}
	return b.String()
}

// appSet is the app-set file declaring apps, every one automated with live
// drift detection, as an operator who wants drift corrected writes it.
func appSet(apps []app) string {
	var b strings.Builder
	b.WriteString("apiVersion: skep/v1\napplications:\n")
	for _, a := range apps {
		fmt.Fprintf(&b, "  - name: %s\n    release: %s\n    source: {repo: %s, revision: main", a.name, a.release, a.repoURL)
		if a.path != "" {
			fmt.Fprintf(&b, ", path: %s", a.path)
		}
		fmt.Fprintf(&b, "}\n    syncPolicy: {automated: true, interval: %s", a.interval)
		if a.resolveNever {
			b.WriteString(", resolveImage: never")
		}
		b.WriteString("}\n    driftDetection: live\n")
	}
	return b.String()
}

// serviceNames lists the full service names of apps' stacks: Skep's, or
// the docker twins' when docker is set.
func serviceNames(apps []app, docker bool) []string {
	var out []string
	for _, a := range apps {
		stack := a.release
		if docker {
			stack = a.docker
		}
		for _, s := range a.services {
			out = append(out, stack+"_"+s)
		}
	}
	return out
}
