package notify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// ForgeProvider names the API dialect of a forge. The zero value is
// invalid.
type ForgeProvider string

// The forges a Forge notifier speaks to.
const (
	GitHub ForgeProvider = "github"
	GitLab ForgeProvider = "gitlab"
	// Gitea covers Forgejo too: they share the API the notifier uses.
	Gitea ForgeProvider = "gitea"
)

// ForgeProviders lists every provider, in a stable order.
func ForgeProviders() []ForgeProvider { return []ForgeProvider{GitHub, GitLab, Gitea} }

// DefaultForgeContext is the status context (GitLab: name) template when a
// notifier sets none.
const DefaultForgeContext = "skep/{{.Application}}"

// PreviewInfo is the preview release a commit was deployed as.
type PreviewInfo struct {
	// Branch is the git branch previewed, without refs/heads/.
	Branch string
	// Domain is the preview's domain, and URL where people open it; when
	// URL is empty, the comment links https://Domain.
	Domain string
	URL    string
}

// PreviewLookup tells a Forge notifier which sync events are about a
// preview, so that it never has to parse Event.Message. Preview reports the
// preview that application app runs at commit, and false when that commit
// is not deployed as one. It is called from the notifier's delivery
// goroutine, never from Notify, and must be safe for concurrent use.
type PreviewLookup interface {
	Preview(ctx context.Context, app, commit string) (PreviewInfo, bool)
}

// Token is a credential. It formats, logs and encodes as "[redacted]";
// convert it with string() only where it is sent.
type Token string

// String implements fmt.Stringer without revealing the token.
func (Token) String() string { return "[redacted]" }

// GoString implements fmt.GoStringer without revealing the token.
func (Token) GoString() string { return "[redacted]" }

// LogValue implements slog.LogValuer without revealing the token.
func (Token) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MarshalText implements encoding.TextMarshaler without revealing the
// token, so a struct holding one encodes to JSON redacted.
func (Token) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// ForgeOptions configures a Forge notifier.
type ForgeOptions struct {
	// Name identifies the notifier in logs and metrics.
	Name string
	// Provider is the forge's API dialect.
	Provider ForgeProvider
	// URL is the API's base URL: https://api.github.com,
	// https://gitlab.example.org/api/v4 or https://gitea.example.org/api/v1.
	// It may not carry credentials.
	URL string
	// Token authenticates every request: as "Authorization: Bearer" on
	// GitHub, "Authorization: token" on Gitea and "PRIVATE-TOKEN" on
	// GitLab.
	Token Token
	// Repositories maps an application name, or a path.Match glob over
	// names, to the forge repository: "owner/name" on GitHub and Gitea, a
	// project path or numeric id on GitLab. An exact name wins over globs,
	// and a longer glob over a shorter one. An application matching none
	// is not reported. The map is read once, by NewForge.
	Repositories map[string]string
	// Context is the status context (GitLab: the status name), a template
	// over the event (ParseTemplate). Empty means DefaultForgeContext.
	Context string
	// TargetURL, when set, is the template of the link a status carries,
	// such as the controller's page for the application.
	TargetURL string
	// Previews, when set, says which events are about a preview; for
	// those, the notifier also keeps one comment on the branch's open pull
	// request up to date. Nil means no comments.
	Previews PreviewLookup
	// Delivery sets routing, suppression, queue, timeout and retries.
	Delivery Delivery
	// Client sends the requests. Default: a client with no timeout of its
	// own (Delivery.Timeout bounds each attempt).
	Client *http.Client
	// Logger receives a Warn line per event not delivered. Default
	// slog.Default().
	Logger *slog.Logger
}

// Forge reports deployments to a forge as commit statuses: sync-started as
// pending (GitLab: running), sync-succeeded as success and sync-failed as
// failure (GitLab: failed), on the event's Revision. Other event types,
// events without a Revision and applications with no repository are not
// sent, and are counted as Suppressed. With a PreviewLookup, a preview's
// sync events also upsert one pull-request comment carrying the preview's
// URL (see TestForgeUpsertsOnePreviewComment). Review posts a pull
// request's plan, outside the event queue.
//
// Notify never blocks: events queue and are sent by Run, retried as
// Webhook's are, except that a Retry-After answer sets the next wait. A
// retried event sends its status again, which the forges take as the same
// state. Build it with NewForge; it is safe for concurrent use.
type Forge struct {
	out      *outbound
	provider ForgeProvider
	base     string
	token    Token
	routes   []route
	context  *template.Template
	target   *template.Template
	previews PreviewLookup
	client   *http.Client
}

// route is one entry of ForgeOptions.Repositories.
type route struct{ pattern, repository string }

// NewForge returns a forge notifier. It fails on an unknown provider, a base
// URL that is not absolute http or https or that carries credentials, a
// missing token, a repository that is not in the provider's form, a bad
// glob and a template that does not parse.
func NewForge(opts ForgeOptions) (*Forge, error) {
	var errs []error
	if !slices.Contains(ForgeProviders(), opts.Provider) {
		errs = append(errs, fmt.Errorf("provider %q is not one of github, gitlab, gitea", opts.Provider))
	}
	u, err := url.Parse(opts.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, errors.New("url is not an absolute http or https URL"))
	case u.User != nil:
		errs = append(errs, errors.New("url carries credentials; pass them as the token"))
	}
	if opts.Token == "" {
		errs = append(errs, errors.New("no token"))
	}
	if opts.Context == "" {
		opts.Context = DefaultForgeContext
	}
	f := &Forge{provider: opts.Provider, base: strings.TrimRight(opts.URL, "/"), token: opts.Token,
		previews: opts.Previews, client: opts.Client}
	for pattern, repo := range opts.Repositories {
		if _, err := path.Match(pattern, ""); err != nil {
			errs = append(errs, fmt.Errorf("repositories: bad glob %q: %w", pattern, err))
		}
		if err := CheckRepository(opts.Provider, repo); err != nil {
			errs = append(errs, fmt.Errorf("repositories: %s: %w", pattern, err))
		}
		f.routes = append(f.routes, route{pattern, repo})
	}
	slices.SortFunc(f.routes, compareRoutes)
	if f.context, err = ParseTemplate("context", opts.Context); err != nil {
		errs = append(errs, err)
	}
	if opts.TargetURL != "" {
		if f.target, err = ParseTemplate("targetURL", opts.TargetURL); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("forge %s: %w", opts.Name, errors.Join(errs...))
	}
	if f.client == nil {
		f.client = &http.Client{}
	}
	f.out = newOutbound(opts.Name, opts.Delivery, opts.Logger, f.send)
	return f, nil
}

// compareRoutes orders exact names first, then globs longest first, then
// by text, so the first route that matches is the most specific.
func compareRoutes(a, b route) int {
	ga, gb := isGlob(a.pattern), isGlob(b.pattern)
	switch {
	case ga != gb && !ga:
		return -1
	case ga != gb:
		return 1
	case len(a.pattern) != len(b.pattern):
		return len(b.pattern) - len(a.pattern)
	}
	return strings.Compare(a.pattern, b.pattern)
}

func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// CheckRepository reports whether repo is a repository as provider names
// one: "owner/name" on GitHub and Gitea; on GitLab a numeric project id or
// a path of two or more segments.
func CheckRepository(provider ForgeProvider, repo string) error {
	parts := strings.Split(repo, "/")
	for _, p := range parts {
		if p == "" || strings.TrimSpace(p) != p || p == "." || p == ".." {
			return fmt.Errorf("want a repository path, got %q", repo)
		}
	}
	switch {
	case provider == GitLab && len(parts) == 1:
		if _, err := strconv.ParseUint(repo, 10, 64); err != nil {
			return fmt.Errorf("want a project path (group/name) or a numeric id, got %q", repo)
		}
	case provider != GitLab && len(parts) != 2:
		return fmt.Errorf("want owner/name, got %q", repo)
	}
	return nil
}

// Name implements Named.
func (f *Forge) Name() string { return f.out.Name() }

// Notify implements Notifier: events the forge takes are routed,
// suppressed and queued; the others are counted as Suppressed.
func (f *Forge) Notify(ctx context.Context, e Event) {
	if _, ok := f.repository(e); !ok {
		f.out.stats.suppressed.Add(1)
		return
	}
	f.out.Notify(ctx, e)
}

// Run implements Runner: it sends queued events until ctx is done.
func (f *Forge) Run(ctx context.Context) error { return f.out.Run(ctx) }

// Stats implements Counted.
func (f *Forge) Stats() Stats { return f.out.Stats() }

// repository returns the repository e is reported to, and false for an
// event the forge does not take.
func (f *Forge) repository(e Event) (string, bool) {
	if e.Revision == "" || f.state(e.Type) == "" {
		return "", false
	}
	return f.Repository(e.Application)
}

// state is the commit status an event type sets, "" for types not sent.
func (f *Forge) state(t EventType) string {
	switch t {
	case SyncStarted:
		if f.provider == GitLab {
			return "running"
		}
		return "pending"
	case SyncSucceeded:
		return "success"
	case SyncFailed:
		if f.provider == GitLab {
			return "failed"
		}
		return "failure"
	}
	return ""
}

// descriptionLimit is the longest description, in characters, a forge
// keeps: GitHub refuses longer ones; GitLab and Gitea store 255.
func (f *Forge) descriptionLimit() int {
	if f.provider == GitHub {
		return 140
	}
	return 255
}

// statusBody is a commit status request. GitLab calls the context "name".
type statusBody struct {
	State       string `json:"state"`
	Context     string `json:"context,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	TargetURL   string `json:"target_url,omitempty"`
}

// send makes one attempt: the status, then the preview comment, if any.
func (f *Forge) send(ctx context.Context, e Event) error {
	repo, ok := f.repository(e)
	if !ok {
		return nil // Notify let it through; the routes are fixed at NewForge
	}
	// A failure's root cause says more in a forge's few characters than
	// the message, which starts with where it failed.
	body := statusBody{State: f.state(e.Type), Description: cut(cmp.Or(e.Cause, e.Message), f.descriptionLimit())}
	label, err := render(f.context, e)
	if err != nil {
		return permanentError{err}
	}
	if f.provider == GitLab {
		body.Name = label
	} else {
		body.Context = label
	}
	if f.target != nil {
		if body.TargetURL, err = render(f.target, e); err != nil {
			return permanentError{err}
		}
	}
	if err := f.call(ctx, http.MethodPost, f.repoPath(repo)+"/statuses/"+url.PathEscape(e.Revision), body, nil); err != nil {
		return err
	}
	if f.previews == nil {
		return nil
	}
	p, ok := f.previews.Preview(ctx, e.Application, e.Revision)
	if !ok {
		return nil
	}
	return f.upsertComment(ctx, repo, e, p)
}

// render executes t on e.
func render(t *template.Template, e Event) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, e); err != nil {
		return "", fmt.Errorf("render %s: %w", t.Name(), err)
	}
	return b.String(), nil
}

// cut folds s onto one line and shortens it to limit characters, ending a
// shortened one with an ellipsis.
func cut(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit-1]) + "…"
}

// repoPath is the API path of repo: /repos/owner/name, or GitLab's
// /projects/ID with a path's slashes escaped, as its API wants.
func (f *Forge) repoPath(repo string) string {
	if f.provider == GitLab {
		return "/projects/" + url.PathEscape(repo)
	}
	owner, name, _ := strings.Cut(repo, "/")
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)
}

// comment is an issue comment or merge-request note.
type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

// pageSize is how many items a list request asks for; maxPages bounds how
// far a search pages, so a pull request with thousands of comments costs a
// bounded number of requests (and gets a second preview comment).
const (
	pageSize = 100
	maxPages = 10
)

// upsertComment keeps one comment for the preview of p.Branch on the
// branch's open pull request: it edits the one carrying the marker or
// posts it. A branch without an open pull request gets none.
func (f *Forge) upsertComment(ctx context.Context, repo string, e Event, p PreviewInfo) error {
	number, ok, err := f.pullRequest(ctx, repo, p.Branch)
	if err != nil || !ok {
		return err
	}
	marker := fmt.Sprintf("<!-- skep-preview:%s:%s -->", e.Application, p.Branch)
	return f.upsert(ctx, repo, number, marker, previewComment(marker, e, p), false)
}

// upsert keeps one comment carrying marker on pull (GitLab: merge)
// request number of repo: it edits the first that carries it or, unless
// editOnly, posts text as a new one.
func (f *Forge) upsert(ctx context.Context, repo string, number int64, marker, text string, editOnly bool) error {
	body := map[string]string{"body": text}
	base := f.repoPath(repo)
	var list, edit, create string
	method := http.MethodPatch
	switch f.provider {
	case GitHub, Gitea:
		list = fmt.Sprintf("%s/issues/%d/comments", base, number)
		edit, create = base+"/issues/comments/", list
	case GitLab:
		list = fmt.Sprintf("%s/merge_requests/%d/notes", base, number)
		edit, create, method = list+"/", list, http.MethodPut
	}
	for page := 1; page <= maxPages; page++ {
		var got []comment
		q := url.Values{"per_page": {strconv.Itoa(pageSize)}, "page": {strconv.Itoa(page)}}
		if f.provider == Gitea {
			q = url.Values{"limit": {strconv.Itoa(pageSize)}, "page": {strconv.Itoa(page)}}
		}
		if err := f.call(ctx, http.MethodGet, list+"?"+q.Encode(), nil, &got); err != nil {
			return err
		}
		for _, c := range got {
			if strings.Contains(c.Body, marker) {
				// Concatenated, not formatted: a GitLab path holds "%2F".
				return f.call(ctx, method, edit+strconv.FormatInt(c.ID, 10), body, nil)
			}
		}
		if len(got) < pageSize {
			break
		}
	}
	if editOnly {
		return nil
	}
	return f.call(ctx, http.MethodPost, create, body, nil)
}

// pullRequest finds the open pull (GitLab: merge) request from branch in
// repo and returns its number (GitLab: iid).
func (f *Forge) pullRequest(ctx context.Context, repo, branch string) (int64, bool, error) {
	base := f.repoPath(repo)
	switch f.provider {
	case GitHub:
		owner, _, _ := strings.Cut(repo, "/")
		var got []struct {
			Number int64 `json:"number"`
		}
		q := url.Values{"head": {owner + ":" + branch}, "state": {"open"}}
		if err := f.call(ctx, http.MethodGet, base+"/pulls?"+q.Encode(), nil, &got); err != nil || len(got) == 0 {
			return 0, false, err
		}
		return got[0].Number, true, nil
	case GitLab:
		var got []struct {
			IID int64 `json:"iid"`
		}
		q := url.Values{"source_branch": {branch}, "state": {"opened"}}
		if err := f.call(ctx, http.MethodGet, base+"/merge_requests?"+q.Encode(), nil, &got); err != nil || len(got) == 0 {
			return 0, false, err
		}
		return got[0].IID, true, nil
	}
	// Gitea cannot filter pull requests by head branch: page through the
	// open ones. A fork's branch of the same name is not this preview.
	for page := 1; page <= maxPages; page++ {
		var got []struct {
			Number int64 `json:"number"`
			Head   struct {
				Ref  string `json:"ref"`
				Repo *struct {
					FullName string `json:"full_name"`
				} `json:"repo"`
			} `json:"head"`
		}
		q := url.Values{"state": {"open"}, "limit": {strconv.Itoa(pageSize)}, "page": {strconv.Itoa(page)}}
		if err := f.call(ctx, http.MethodGet, base+"/pulls?"+q.Encode(), nil, &got); err != nil {
			return 0, false, err
		}
		for _, pr := range got {
			if pr.Head.Ref == branch && (pr.Head.Repo == nil || strings.EqualFold(pr.Head.Repo.FullName, repo)) {
				return pr.Number, true, nil
			}
		}
		if len(got) < pageSize {
			break
		}
	}
	return 0, false, nil
}

// previewComment is the comment text for a preview: the marker that finds
// it again, where the preview is, and what the last sync did.
func previewComment(marker string, e Event, p PreviewInfo) string {
	link := p.URL
	if link == "" && p.Domain != "" {
		link = "https://" + p.Domain
	}
	short := e.Revision[:min(len(e.Revision), 7)]
	var state string
	switch e.Type {
	case SyncStarted:
		state = fmt.Sprintf("Deploying `%s`…", short)
	case SyncSucceeded:
		state = fmt.Sprintf("Deployed `%s`.", short)
	default:
		state = fmt.Sprintf("Deploying `%s` failed: %s", short, cut(e.Message, 500))
	}
	return fmt.Sprintf("%s\n**Preview** of `%s` for branch `%s`: %s\n\n%s\n", marker, e.Application, p.Branch, link, state)
}

// maxAnswer bounds what is read of an answer: a page of comments fits.
const maxAnswer = 8 << 20

// call makes one request to the API path (query included), sending in as
// JSON when not nil and decoding the answer into out when not nil.
func (f *Forge) call(ctx context.Context, method, apiPath string, in, out any) error {
	op := method + " " + apiPath
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return permanentError{fmt.Errorf("%s: %w", op, err)}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.base+apiPath, body)
	if err != nil {
		return permanentError{fmt.Errorf("%s: build request", op)}
	}
	switch f.provider {
	case GitHub:
		req.Header.Set("Authorization", "Bearer "+string(f.token))
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	case GitLab:
		req.Header.Set("PRIVATE-TOKEN", string(f.token))
		req.Header.Set("Accept", "application/json")
	case Gitea:
		req.Header.Set("Authorization", "token "+string(f.token))
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", "skep")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		// url.Error repeats the URL; op already names the request.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return f.answerError(op, resp, data)
	}
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", op, err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return permanentError{fmt.Errorf("%s: decode answer: %w", op, err)}
		}
	}
	return nil
}

// answerError classes a refusal: a 4xx other than 408 and 429 is
// permanent; a 429 or 503 with Retry-After says when to retry. The forge's
// own message is kept, with the token cut out in case it was echoed.
func (f *Forge) answerError(op string, resp *http.Response, data []byte) error {
	var answer struct {
		Message string `json:"message"`
	}
	msg := ""
	if json.Unmarshal(data, &answer) == nil && answer.Message != "" {
		msg = ": " + cut(strings.ReplaceAll(answer.Message, string(f.token), "[redacted]"), 200)
	}
	err := fmt.Errorf("%s: forge answered %s%s", op, resp.Status, msg)
	code := resp.StatusCode
	if (code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable) && resp.Header.Get("Retry-After") != "" {
		if after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return retryAfter{err: err, After: after}
		}
	}
	if code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests {
		return permanentError{err}
	}
	return err
}

// parseRetryAfter reads a Retry-After value: seconds, or an HTTP date
// relative to now.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

var _ interface {
	Notifier
	Runner
	Named
	Counted
} = (*Forge)(nil)
