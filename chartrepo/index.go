package chartrepo

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"go.yaml.in/yaml/v3"
)

// indexFile is the part of Helm's index.yaml that Skep reads. Decoding is
// lenient: indexes carry many keys (generated, serverInfo, a chart's whole
// Chart.yaml per entry) that change nothing here.
type indexFile struct {
	APIVersion string                  `yaml:"apiVersion"`
	Entries    map[string][]indexEntry `yaml:"entries"`
}

type indexEntry struct {
	Version string   `yaml:"version"`
	URLs    []string `yaml:"urls"`
	Digest  string   `yaml:"digest"`
}

// entry is one resolved archive: what to download and what it must hash to.
type entry struct {
	name, version string
	url           *url.URL
	digest        string // lower-case hex SHA-256
}

// maxListed bounds the versions a not-found error lists.
const maxListed = 20

// lookup reads the index at base and resolves version of chart name.
func (r *Repos) lookup(ctx context.Context, base *url.URL, name, version string) (entry, error) {
	indexURL := base.JoinPath("index.yaml")
	data, err := r.get(ctx, indexURL, r.opts.MaxIndex, "index")
	if err != nil {
		return entry{}, err
	}
	var idx indexFile
	if err := yaml.Unmarshal(data, &idx); err != nil {
		return entry{}, failf(ErrBadIndex, "%s: %w", display(indexURL), err)
	}
	versions, ok := idx.Entries[name]
	if !ok || len(versions) == 0 {
		return entry{}, failf(ErrNotFound, "chart %s not in %s", name, display(indexURL))
	}
	i := slices.IndexFunc(versions, func(e indexEntry) bool { return e.Version == version })
	if i < 0 {
		return entry{}, failf(ErrNotFound, "version %s of chart %s not in %s; it has %s",
			version, name, display(indexURL), listVersions(versions))
	}
	ie := versions[i]
	digest := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(ie.Digest), "sha256:"))
	if digest == "" {
		return entry{}, failf(ErrBadIndex, "%s: version %s of chart %s has no digest; refusing an archive that cannot be verified",
			display(indexURL), version, name)
	}
	if b, err := hex.DecodeString(digest); err != nil || len(b) != 32 {
		return entry{}, failf(ErrBadIndex, "%s: version %s of chart %s: digest is not a SHA-256 in hex",
			display(indexURL), version, name)
	}
	if len(ie.URLs) == 0 || ie.URLs[0] == "" {
		return entry{}, failf(ErrBadIndex, "%s: version %s of chart %s has no urls", display(indexURL), version, name)
	}
	// Helm downloads the first URL; the others are mirrors Skep ignores.
	ref, err := url.Parse(ie.URLs[0])
	if err != nil {
		return entry{}, failf(ErrBadIndex, "%s: version %s of chart %s: archive URL does not parse", display(indexURL), version, name)
	}
	u := base.ResolveReference(ref)
	if err := r.checkURL(u); err != nil {
		return entry{}, fmt.Errorf("%s: version %s of chart %s: %w", display(indexURL), version, name, err)
	}
	return entry{name: name, version: version, url: u, digest: digest}, nil
}

// listVersions writes the versions of an index entry, newest first when
// they parse as SemVer, at most maxListed of them.
func listVersions(es []indexEntry) string {
	var vs []string
	for _, e := range es {
		if e.Version != "" && !slices.Contains(vs, e.Version) {
			vs = append(vs, e.Version)
		}
	}
	slices.SortStableFunc(vs, func(a, b string) int {
		va, ea := semver.NewVersion(a)
		vb, eb := semver.NewVersion(b)
		if ea != nil || eb != nil {
			return strings.Compare(a, b)
		}
		return va.Compare(vb)
	})
	if len(vs) == 0 {
		return "no versions"
	}
	if len(vs) > maxListed {
		more := len(vs) - maxListed
		vs = append(vs[len(vs)-maxListed:], fmt.Sprintf("and %d older", more))
	}
	return strings.Join(vs, ", ")
}

// get reads u whole, refusing a status other than 200 and a body over
// limit; what names it in messages ("index", "archive").
func (r *Repos) get(ctx context.Context, u *url.URL, limit int64, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, display(u), err)
	}
	auth, err := r.authorization(u.String())
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		// *url.Error repeats the URL, query included; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %w", what, display(u), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: status %s", what, display(u), resp.Status)
	}
	if resp.ContentLength > limit {
		return nil, failf(ErrTooLarge, "%s %s is larger than %s", what, display(u), size(limit))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, display(u), err)
	}
	if int64(len(data)) > limit {
		return nil, failf(ErrTooLarge, "%s %s is larger than %s", what, display(u), size(limit))
	}
	return data, nil
}

// size writes n bytes as a reader would: 20 MiB, 512 KiB or 1000 bytes.
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func basicAuth(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// kindError is an error of one of the package's kinds whose message does
// not repeat the kind's name: errors.Is finds the kind, and errors.As or
// errors.Is the cause, if any.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// failf returns an error of kind with a message made as fmt.Errorf makes it.
func failf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}
