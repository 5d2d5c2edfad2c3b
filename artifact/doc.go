// Package artifact decides which version of each release artifact a render
// uses: the version git asks for (a pinned release tag or a branch head),
// but only once its image is in the registry and its deploy is not
// suspended; otherwise the version the swarm runs now.
//
// It holds three things: the artifact files (one directory per environment
// in git, in Skep's own shape or in the shape release repositories already
// keep, decoded strictly through configfile), the rules of one artifact
// (Object: Version, Drift, Parameter), and the registry gate (Registry: does
// a manifest exist, and under which digest).
//
// It must never fall back to nothing: when neither the desired nor the
// current version can be used, the artifact has no version and the caller
// must wait, not deploy. It never writes to a registry or to git, and never
// prints a registry credential.
package artifact
