// Package harness starts or finds the real parts Skep's integration tests
// run against: a Docker Engine in swarm mode, an OCI registry, a git server
// over smart HTTP, and test images built FROM scratch.
//
// It never fakes any of them. RequireSwarm fails the test when
// SKEP_REQUIRE_SWARM=1 (as `make test` and CI set it) and no swarm answers;
// only without that variable does it skip. Everything a helper creates is
// named uniquely per test (see Name) and removed in t.Cleanup; a helper
// must never remove what it cannot tie to the test's own names.
//
// Helpers take a testing.TB and fail the test themselves, so a test reads
// as its steps. They wait on conditions (Eventually), never a fixed sleep.
//
// This machine's kernel has no IPVS, so a service's virtual IP and ingress
// published ports do not work here. Test stacks use `endpoint_mode: dnsrr`,
// `tasks.<service>` names and `mode: host` ports; PublishHostPort does that.
package harness
