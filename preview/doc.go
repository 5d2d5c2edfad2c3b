// Package preview turns a release into a temporary copy of itself for one
// branch under review: named and routed by a short hash of the branch,
// made safe to run beside the main release, and chosen from the branches
// of a repository by patterns.
//
// It is pure: it takes values and returns values, does no I/O, and never
// modifies a release it is given. It must never produce a copy that could
// take over the main release's traffic: published ports are dropped (or
// moved to a slot of their own), network aliases dropped, and every router
// and service name of Traefik and Caddy labels made unique to the preview.
package preview
