// Package bench measures Skep's speed on this machine's swarm, side by
// side with `docker stack deploy` run the same way in the same run, and
// prints the results as one table against the targets of issue 16 (see
// docs/performance.md for the latest table and what each number means).
//
// Run runs everything once: a git server, a counting proxy on a unix
// socket in front of the Engine (the controller's and the docker CLI's
// DOCKER_HOST), generated stacks, and `skep controller` as a subprocess
// with a data directory, an admin token file and a webhooks file. It
// measures idle Engine requests, CPU and RSS at 20 applications and at a
// larger scale point, the first deploy of 20 stacks, a webhook push, the
// polling floor and an out-of-band change corrected. Options.DeployOnly
// runs the first deploy alone, several times, for a median;
// Options.IdleOnly the idle window at 20 applications, several windows
// on one controller.
//
// Soak runs the same parts under load for a fixed time (issue 18, `make
// soak`; docs/reliability.md): commits announced by webhooks, out-of-band
// changes through the Engine API, event-stream subscribers and API
// readers at once, read through package client. It counts errors and
// judges the controller's memory; TestSoak fails on either.
//
// StartHA runs a replicated controller (issue 38): replicas of `skep
// controller --leader-election`, each behind a counting proxy of its own
// that logs every Engine write and its answer, read back as the leader
// terms, the writes sent outside one's own term, and the revisions by
// commit. StartDeployment adds an application whose commits flow; the
// take-over measurement (Options.FailoverOnly), SoakHA (`make soak-ha`)
// and TestReplicatedControllerFailsOverWithOneWriter build on it.
//
// Like harness, whose helpers it uses, it takes a testing.TB and fails it
// on error; BenchmarkSwarm, TestSoak and TestSoakHA are its entry points
// (`make bench`, `make soak`, `make soak-ha`), so Skep keeps one binary. It removes everything it creates: stacks by their
// unique names (harness.CleanupStack), the controller with SIGINT, temp
// directories with the benchmark. Only the measuring code times anything;
// no test asserts a time.
package bench
