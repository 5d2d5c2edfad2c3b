package chartrepo

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/skep-cd/skep/secret"
)

// Credential authenticates the requests whose URL starts with URLPrefix:
// HTTP basic auth (Username and Password) or a bearer Token, read from
// their secret.Source at each request so a rotated file takes effect. The
// longest matching prefix wins. A prefix without a path stands for the
// whole host ("https://charts.example.org" matches
// "https://charts.example.org/web-1.0.0.tgz" but not
// "https://charts.example.org.evil.test/").
type Credential struct {
	URLPrefix string
	Username  string
	Password  secret.Source
	Token     secret.Source
}

// header returns the Authorization header value of c.
func (c Credential) header(getenv func(string) string) (string, error) {
	if !c.Token.IsZero() {
		t, err := c.Token.Read(getenv)
		if err != nil {
			return "", fmt.Errorf("credential for %s: token: %w", c.URLPrefix, err)
		}
		return "Bearer " + t, nil
	}
	p, err := c.Password.Read(getenv)
	if err != nil {
		return "", fmt.Errorf("credential for %s: password: %w", c.URLPrefix, err)
	}
	// Built by hand: http.Request.SetBasicAuth would do, but the header is
	// chosen before the request exists.
	return "Basic " + basicAuth(c.Username, p), nil
}

// checkCredentials validates creds and returns them with normalised
// prefixes. Every problem is reported at once.
func checkCredentials(creds []Credential, allowHTTP bool) ([]Credential, error) {
	var errs []error
	out := make([]Credential, 0, len(creds))
	for i, c := range creds {
		u, err := url.Parse(c.URLPrefix)
		switch {
		case err != nil || u.Host == "":
			errs = append(errs, fmt.Errorf("credentials[%d].urlPrefix: want an https URL", i))
			continue
		case u.User != nil:
			errs = append(errs, failf(ErrInsecureURL, "credentials[%d].urlPrefix: userinfo in the URL; use username and password", i))
			continue
		case u.Scheme != "https" && (u.Scheme != "http" || !allowHTTP):
			errs = append(errs, failf(ErrInsecureURL, "credentials[%d].urlPrefix: want https, got %s", i, u.Scheme))
			continue
		}
		basic := c.Username != "" || !c.Password.IsZero()
		switch {
		case basic && !c.Token.IsZero():
			errs = append(errs, fmt.Errorf("credentials[%d]: set a token or a username and password, not both", i))
		case basic && (c.Username == "" || c.Password.IsZero()):
			errs = append(errs, fmt.Errorf("credentials[%d]: basic auth needs both a username and a password", i))
		case !basic && c.Token.IsZero():
			errs = append(errs, fmt.Errorf("credentials[%d]: no token and no username and password", i))
		}
		u.Scheme = strings.ToLower(u.Scheme)
		u.Host = strings.ToLower(u.Host)
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		c.URLPrefix = u.String()
		out = append(out, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// match returns the credential with the longest prefix of u. A prefix ends
// in "/", so it also matches u equal to the prefix without that slash.
func match(creds []Credential, u string) (Credential, bool) {
	var best Credential
	found := false
	for _, c := range creds {
		if (strings.HasPrefix(u, c.URLPrefix) || u == strings.TrimSuffix(c.URLPrefix, "/")) &&
			(!found || len(c.URLPrefix) > len(best.URLPrefix)) {
			best, found = c, true
		}
	}
	return best, found
}

// parseRepo checks a repository URL and returns it with a trailing slash,
// the base its index.yaml and relative archive URLs resolve against.
func (r *Repos) parseRepo(repoURL string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(repoURL))
	if err != nil || u.Host == "" || u.Opaque != "" {
		// url.Error quotes the input, which may hold a password.
		return nil, errors.New("repository URL is not an absolute URL")
	}
	if err := r.checkURL(u); err != nil {
		return nil, fmt.Errorf("repository: %w", err)
	}
	if u.Fragment != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("repository %s: a query or fragment is not supported", display(u))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		u.RawPath = ""
	}
	return u, nil
}

// checkURL refuses userinfo and any scheme but https (http to a loopback
// host when allowed). It guards the repository, each archive URL and every
// redirect.
func (r *Repos) checkURL(u *url.URL) error {
	if u.User != nil {
		return failf(ErrInsecureURL, "%s carries credentials; configure them as a Credential", display(u))
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if r.opts.AllowHTTP && loopback(u.Hostname()) {
			return nil
		}
		return failf(ErrInsecureURL, "%s is plain http; want https", display(u))
	}
	return failf(ErrInsecureURL, "%s: scheme %q is not https", display(u), u.Scheme)
}

// loopback reports whether host is localhost or a loopback address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// display writes u for an error or a log: without userinfo, query or
// fragment, where signed URLs keep their tokens.
func display(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return c.String()
}
