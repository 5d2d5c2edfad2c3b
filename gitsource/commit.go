package gitsource

// shortLen is how many hex digits of a commit id messages and tables show:
// enough to be unique in any repository Skep meets, short enough to read.
const shortLen = 12

// ShortCommit returns the first 12 hex digits of a commit id, the form every
// message, event and table of Skep shows; a shorter string (a branch, "")
// is returned as it is.
func ShortCommit(commit string) string {
	if len(commit) > shortLen {
		return commit[:shortLen]
	}
	return commit
}
