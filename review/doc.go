// Package review plans pull requests: for each application whose inputs
// a pull request's head changes, what merging it would change in the swarm,
// rendered with the inputs the merge would give and compared with what the
// swarm runs, posted back to the forge as one comment and a commit status
// per application, and kept for the API and the UI.
//
// It fills api.Reviews: the API hands it verified pull-request events and
// asks it for plans; cli wires it with the controller, the git cache and
// the forge notifiers. A review never writes to the swarm or to git, runs
// no hook, raises no event and changes no application's status: it asks
// the controller for Propose only. A pull request from a fork is planned
// sealed (no decryption key is used), from the base repository's own ref
// of its head, and its changes to artifact files or the app set are
// planned only as far as they name repositories the controller already
// reads (docs/security.md, "An attacker with a pull request").
//
// Work is bounded: events queue per pull request, a newer event replacing
// an older one still waiting, at most Options.Queue pull requests wait,
// one is planned at a time in the background, and a head already planned
// is not planned again (see TestAForcePushStormPlansEachHeadOnce).
package review
