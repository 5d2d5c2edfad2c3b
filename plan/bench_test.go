package plan

import (
	"fmt"
	"testing"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// BenchmarkDrift measures the live drift comparison a live-drift
// application runs on every wake: Drift of a release of n services against
// the live services as the Engine lists them (digest-pinned images, ids for
// names, daemon defaults). "unchanged" finds nothing; "scaled" finds the one
// service scaled out of band, as `docker service scale` leaves it.
//
//	go test -run '^$' -bench Drift -benchmem ./plan/
func BenchmarkDrift(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		desired, live := bigRelease(n)
		b.Run(fmt.Sprintf("services=%d/unchanged", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := Drift(desired, live, webOpts); len(got) != 0 {
					b.Fatalf("Drift(as applied) = %+v, want no findings", got)
				}
			}
		})
		scaled := make(map[string]swarm.Service, len(live))
		for name, svc := range live {
			scaled[name] = svc
		}
		first := fmt.Sprintf("web_app%04d", 0)
		svc := scaled[first]
		svc.Spec = copyService(svc.Spec)
		three := uint64(3)
		svc.Spec.Mode.Replicated.Replicas = &three
		scaled[first] = svc
		b.Run(fmt.Sprintf("services=%d/scaled", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := Drift(desired, scaled, webOpts); len(got) != 1 {
					b.Fatalf("Drift(one scaled) = %+v, want one finding", got)
				}
			}
		})
	}
}

// bigRelease returns release "web" with n copies of webRelease's service,
// and those services as the Engine lists them once applied.
func bigRelease(n int) (stack.Release, map[string]swarm.Service) {
	rel := webRelease()
	app := rel.Services["web_app"]
	delete(rel.Services, "web_app")
	live := make(map[string]swarm.Service, n)
	for i := range n {
		spec := copyService(app)
		spec.Name = fmt.Sprintf("web_app%04d", i)
		rel.Services[spec.Name] = spec
		live[spec.Name] = asLive(spec, "hash-1")
	}
	return rel, live
}
