package gitsource

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// location is a repository URL taken apart once: what go-git dials, what
// names the clone on disk, and what credential prefixes are matched against.
type location struct {
	transport string // handed to go-git; never carries a password
	key       string // normalised URL naming the clone; keeps an ssh user
	match     string // key without userinfo, compared with credential prefixes
	host      string // scheme and host, the unit of the per-host limit
	user      string // ssh user from the URL, if any
	scheme    string // http, https, ssh, git or file
}

// errPasswordInURL refuses a URL with a password: it would be written to
// the clone's config and shown wherever the URL is.
var errPasswordInURL = errors.New("a password in the URL is not allowed: put it in the credentials file")

// scpLike matches git's "user@host:path" form: a colon before any slash.
var scpLike = regexp.MustCompile(`^(?:([^@/]+)@)?([^@/:]+):(.*)$`)

// urlScheme is a URL scheme as RFC 3986 spells it; RedactURL uses it to
// tell "https://..." from a path that merely contains "://".
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// defaultPorts are dropped when normalising, so https://h:443/r and
// https://h/r share a clone and a credential.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ssh": "22", "git": "9418"}

// parseLocation normalises a repository reference: an http(s), ssh, git or
// file URL, an scp-like "user@host:path", or a local path (made absolute).
// Scheme and host are lower-cased, default ports and trailing slashes
// dropped. A URL with a password is refused: secrets come from credentials.
func parseLocation(repo string) (location, error) { return parse(repo, false) }

// parsePrefix normalises a credential's URL prefix like a repository URL,
// except that it may stop at the host.
func parsePrefix(prefix string) (location, error) { return parse(prefix, true) }

// parse is parseLocation and parsePrefix; prefix allows an empty path.
func parse(repo string, prefix bool) (location, error) {
	s := strings.TrimSpace(repo)
	if s == "" {
		return location{}, errors.New("repository URL is empty")
	}
	if strings.Contains(s, "://") {
		return parseURLLocation(s, prefix)
	}
	// An absolute path is checked first: on Windows "C:/repo" would
	// otherwise read as the host C.
	if m := scpLike.FindStringSubmatch(s); m != nil && !filepath.IsAbs(s) {
		user, host, p := m[1], strings.ToLower(m[2]), strings.TrimSuffix(m[3], "/")
		if strings.Contains(user, ":") {
			return location{}, fmt.Errorf("repository URL %q: %w", RedactURL(s), errPasswordInURL)
		}
		if p == "" && !prefix {
			return location{}, fmt.Errorf("repository URL %q has no path", RedactURL(s))
		}
		key := "ssh://" + host + "/" + strings.TrimPrefix(p, "/")
		l := location{transport: s, match: key, host: "ssh://" + host, user: user, scheme: "ssh"}
		l.key = key
		if user != "" {
			l.key = "ssh://" + user + "@" + host + "/" + strings.TrimPrefix(p, "/")
		}
		return l, nil
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return location{}, fmt.Errorf("repository path %q: %w", s, err)
	}
	return fileLocation(abs), nil
}

// fileLocation is the location of a local repository at the absolute path
// abs; all local repositories share the per-host limit of "file://".
func fileLocation(abs string) location {
	key := "file://" + filepath.ToSlash(abs)
	return location{transport: abs, key: key, match: key, host: "file://", scheme: "file"}
}

// parseURLLocation is parse for a string with "://".
func parseURLLocation(s string, prefix bool) (location, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the input, which may hold a password.
		return location{}, fmt.Errorf("repository URL %q does not parse", RedactURL(s))
	}
	scheme := strings.ToLower(u.Scheme)
	if _, hasPassword := u.User.Password(); hasPassword {
		return location{}, fmt.Errorf("repository URL %q: %w", RedactURL(s), errPasswordInURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return location{}, fmt.Errorf("repository URL %q must not have a query or fragment", RedactURL(s))
	}
	switch scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return location{}, fmt.Errorf("file URL %q names a host", RedactURL(s))
		}
		if !path.IsAbs(u.Path) {
			return location{}, fmt.Errorf("file URL %q needs an absolute path", RedactURL(s))
		}
		return fileLocation(filepath.FromSlash(path.Clean(u.Path))), nil
	case "http", "https", "ssh", "git":
	default:
		return location{}, fmt.Errorf("repository URL %q: unsupported scheme %q", RedactURL(s), u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return location{}, fmt.Errorf("repository URL %q has no host", RedactURL(s))
	}
	// Hostname strips an IPv6 literal's brackets; they are needed back
	// before a port is appended.
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" && port != defaultPorts[scheme] {
		host += ":" + port
	}
	p := strings.TrimRight(u.EscapedPath(), "/")
	if p == "" && !prefix {
		return location{}, fmt.Errorf("repository URL %q has no path", RedactURL(s))
	}
	l := location{
		match:  scheme + "://" + host + p,
		host:   scheme + "://" + host,
		scheme: scheme,
	}
	l.key, l.transport = l.match, l.match
	if scheme == "ssh" && u.User != nil && u.User.Username() != "" {
		l.user = u.User.Username()
		l.key = scheme + "://" + url.User(l.user).String() + "@" + host + p
		l.transport = l.key
	}
	return l, nil
}

// matchesPrefix reports whether the normalised URL u lies under the
// normalised prefix p. Prefixes match whole path segments, so
// "https://h/team" covers "https://h/team/app" but not "https://h/team-b".
func matchesPrefix(u, p string) bool {
	if !strings.HasPrefix(u, p) {
		return false
	}
	return len(u) == len(p) || strings.HasSuffix(p, "/") || u[len(p)] == '/'
}

// RedactURL returns s with any userinfo (user name and password) removed, so
// that it can go into an error or a log line. It never fails and errs on
// the side of removing too much: everything between "://" and the last "@"
// goes, because a password with an unescaped "/", "#" or "?" makes the
// userinfo look like a path or a fragment. (A path holding an "@" is thus
// shortened too.) Without "://" (scp-like "user@host:path"), whatever
// precedes an "@" before the first "/" goes.
func RedactURL(s string) string {
	rest, scheme := s, ""
	if i := strings.Index(s, "://"); i > 0 && urlScheme.MatchString(s[:i]) {
		scheme, rest = s[:i+3], s[i+3:]
	} else if j := strings.Index(s, "/"); j >= 0 {
		rest = s[:j]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	return scheme + s[len(scheme)+at+1:]
}
