package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// PullAction is what happened to a pull request, in Skep's words for
// what each forge says its own way.
type PullAction string

// The actions a pull request's plan follows. Any other event of a pull
// request (a label, a review, an edit of its title) is ignored.
const (
	// PullOpened: a pull request was opened; its head is planned.
	PullOpened PullAction = "opened"
	// PullSynchronized: new commits moved its head, which is planned.
	PullSynchronized PullAction = "synchronized"
	// PullReopened: a closed pull request was opened again.
	PullReopened PullAction = "reopened"
	// PullClosed: it was closed, merged (Merged) or not; its comment says
	// so and nothing more is posted.
	PullClosed PullAction = "closed"
)

// PullRequest is what a verified pull-request delivery says: like a push,
// a hint naming a repository and a commit, never trusted beyond them.
type PullRequest struct {
	// Provider is the webhook provider it came from.
	Provider string
	Action   PullAction
	// Merged is set for a pull request closed by its merge.
	Merged bool
	// Number is the pull request's number (GitLab: the merge request's
	// iid, Bitbucket: its id), Title and URL its title and web page.
	Number int64
	Title  string
	URL    string
	// Repository is the base repository as the forge names it: owner/name,
	// a GitLab project path, a Bitbucket Server PROJECT/slug.
	Repository string
	// Repositories are the base repository's URLs, matched against
	// applications' repos as a push's are (RepoKey).
	Repositories []string
	// Base is the branch it merges into, Branch the branch it comes from,
	// both without refs/heads/.
	Base, Branch string
	// Head is the commit at its head (Bitbucket Cloud abbreviates it to
	// twelve digits).
	Head string
	// Ref is the ref under which the base repository keeps the head
	// (refs/pull/7/head, refs/merge-requests/7/head,
	// refs/pull-requests/7/from); "" where the forge keeps none.
	Ref string
	// Fork is set when the head comes from another repository than the
	// base: its plan is sealed, and reads nothing the controller does not
	// already read.
	Fork bool
}

// Key names the pull request across its events: provider, repository and
// number.
func (p PullRequest) Key() string {
	return p.Provider + ":" + strings.ToLower(p.Repository) + "#" + strconv.FormatInt(p.Number, 10)
}

// IsPullRequest reports whether a delivery of provider, with headers h
// and body, reports a pull request rather than a push: its event is one of
// the Scheme's PullEvents, or a GitLab system hook's body has object_kind
// merge_request (the only body it decodes).
func IsPullRequest(provider string, h http.Header, body []byte) bool {
	sc, ok := schemes[provider]
	if !ok {
		return false
	}
	_, event := first(h, sc.Event)
	if provider == ProviderGitLab && event == "System Hook" {
		var p struct {
			ObjectKind string `json:"object_kind"`
		}
		return json.Unmarshal(body, &p) == nil && p.ObjectKind == "merge_request"
	}
	return slices.Contains(sc.PullEvents, event)
}

// ParsePullRequest reads what a verified pull-request delivery says.
// ignored is non-empty, and says why, for an event that changes neither
// the head nor whether the pull request is open (a label, an approval).
// err is set for a payload that cannot be read or lacks its number, its
// repository, its branches or, open, its head. It never panics.
func ParsePullRequest(provider string, h http.Header, body []byte) (pr PullRequest, ignored string, err error) {
	if !IsPullRequest(provider, h, body) {
		return PullRequest{}, "", fmt.Errorf("%s delivery does not report a pull request", provider)
	}
	_, event := first(h, schemes[provider].Event)
	switch provider {
	case ProviderGitHub, ProviderGitea, ProviderForgejo:
		pr, err = parseGitHubPull(body)
	case ProviderGitLab:
		pr, err = parseGitLabPull(body)
	case ProviderBitbucket:
		pr, err = parseBitbucketPull(event, body)
	case ProviderBitbucketServer:
		pr, err = parseBitbucketServerPull(event, body)
	}
	if err != nil {
		return PullRequest{}, "", fmt.Errorf("payload: %w", err)
	}
	if pr.Action == "" {
		return PullRequest{}, "the pull request event changes neither its head nor its state", nil
	}
	pr.Provider = provider
	pr.Repositories = dedupe(pr.Repositories)
	switch {
	case pr.Number <= 0:
		return PullRequest{}, "", errors.New("payload names no pull request number")
	case !slices.ContainsFunc(pr.Repositories, func(u string) bool { return RepoKey(u) != "" }):
		return PullRequest{}, "", errors.New("payload names no repository URL")
	case pr.Repository == "" || pr.Base == "":
		return PullRequest{}, "", errors.New("payload names no base repository or branch")
	case pr.Action != PullClosed && !isHex(pr.Head):
		return PullRequest{}, "", fmt.Errorf("payload names no head commit, got %q", pr.Head)
	}
	return pr, "", nil
}

// isHex reports whether s is a commit id, abbreviated to no fewer than 7
// digits or whole.
func isHex(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	return strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// githubPull is the part of a GitHub, Gitea or Forgejo pull_request
// payload that is read.
type githubPull struct {
	Action      string `json:"action"`
	Number      int64  `json:"number"`
	PullRequest struct {
		Number  int64      `json:"number"`
		Title   string     `json:"title"`
		HTMLURL string     `json:"html_url"`
		Merged  bool       `json:"merged"`
		Head    githubSide `json:"head"`
		Base    githubSide `json:"base"`
	} `json:"pull_request"`
	Repository *struct {
		FullName string `json:"full_name"`
		forgeRepository
	} `json:"repository"`
}

// githubSide is a pull request's head or base.
type githubSide struct {
	Ref  string `json:"ref"`
	SHA  string `json:"sha"`
	Repo *struct {
		FullName string `json:"full_name"`
	} `json:"repo"`
}

func parseGitHubPull(body []byte) (PullRequest, error) {
	var p githubPull
	if err := json.Unmarshal(body, &p); err != nil {
		return PullRequest{}, err
	}
	pr := PullRequest{Number: cmp.Or(p.PullRequest.Number, p.Number), Title: p.PullRequest.Title, URL: p.PullRequest.HTMLURL,
		Merged: p.PullRequest.Merged, Base: p.PullRequest.Base.Ref, Branch: p.PullRequest.Head.Ref, Head: p.PullRequest.Head.SHA}
	switch p.Action {
	case "opened":
		pr.Action = PullOpened
	case "synchronize", "synchronized": // GitHub; Gitea and Forgejo
		pr.Action = PullSynchronized
	case "reopened":
		pr.Action = PullReopened
	case "closed":
		pr.Action = PullClosed
	}
	if p.Repository != nil {
		pr.Repository = p.Repository.FullName
		pr.Repositories = p.Repository.urls()
	}
	pr.Ref = fmt.Sprintf("refs/pull/%d/head", pr.Number)
	// A head whose repository is gone (a deleted fork) is a fork too.
	head, base := p.PullRequest.Head.Repo, p.PullRequest.Base.Repo
	pr.Fork = head == nil || base != nil && !strings.EqualFold(head.FullName, base.FullName)
	return pr, nil
}

// gitlabPull is the part of a GitLab merge request hook (or system hook)
// that is read.
type gitlabPull struct {
	Project *struct {
		PathWithNamespace string `json:"path_with_namespace"`
		forgeRepository
	} `json:"project"`
	Repository *forgeRepository `json:"repository"`
	Attributes struct {
		IID             int64  `json:"iid"`
		Title           string `json:"title"`
		URL             string `json:"url"`
		Action          string `json:"action"`
		SourceBranch    string `json:"source_branch"`
		TargetBranch    string `json:"target_branch"`
		SourceProjectID int64  `json:"source_project_id"`
		TargetProjectID int64  `json:"target_project_id"`
		LastCommit      struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

func parseGitLabPull(body []byte) (PullRequest, error) {
	var p gitlabPull
	if err := json.Unmarshal(body, &p); err != nil {
		return PullRequest{}, err
	}
	a := p.Attributes
	pr := PullRequest{Number: a.IID, Title: a.Title, URL: a.URL, Base: a.TargetBranch, Branch: a.SourceBranch, Head: a.LastCommit.ID,
		Fork: a.SourceProjectID != a.TargetProjectID, Ref: fmt.Sprintf("refs/merge-requests/%d/head", a.IID)}
	// "update" is every change, new commits or a label: the plan of a
	// head already planned is not made again.
	switch a.Action {
	case "open":
		pr.Action = PullOpened
	case "update":
		pr.Action = PullSynchronized
	case "reopen":
		pr.Action = PullReopened
	case "close":
		pr.Action = PullClosed
	case "merge":
		pr.Action, pr.Merged = PullClosed, true
	}
	if p.Project != nil {
		pr.Repository = p.Project.PathWithNamespace
		pr.Repositories = p.Project.urls()
	}
	pr.Repositories = append(pr.Repositories, p.Repository.urls()...)
	return pr, nil
}

// bitbucketSide is a Bitbucket Cloud pull request's source or destination.
type bitbucketSide struct {
	Branch struct {
		Name string `json:"name"`
	} `json:"branch"`
	Commit *struct {
		Hash string `json:"hash"`
	} `json:"commit"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// bitbucketPull is the part of a Bitbucket Cloud pullrequest:* payload
// that is read.
type bitbucketPull struct {
	PullRequest struct {
		ID    int64  `json:"id"`
		Title string `json:"title"`
		Links struct {
			HTML struct {
				Href string `json:"href"`
			} `json:"html"`
		} `json:"links"`
		Source      bitbucketSide `json:"source"`
		Destination bitbucketSide `json:"destination"`
	} `json:"pullrequest"`
	Repository *bitbucketRepository `json:"repository"`
}

func parseBitbucketPull(event string, body []byte) (PullRequest, error) {
	var p bitbucketPull
	if err := json.Unmarshal(body, &p); err != nil {
		return PullRequest{}, err
	}
	b := p.PullRequest
	pr := PullRequest{Number: b.ID, Title: b.Title, URL: b.Links.HTML.Href, Base: b.Destination.Branch.Name, Branch: b.Source.Branch.Name}
	if b.Source.Commit != nil {
		pr.Head = b.Source.Commit.Hash
	}
	switch event {
	case "pullrequest:created":
		pr.Action = PullOpened
	case "pullrequest:updated":
		pr.Action = PullSynchronized
	case "pullrequest:fulfilled":
		pr.Action, pr.Merged = PullClosed, true
	case "pullrequest:rejected":
		pr.Action = PullClosed
	}
	if p.Repository != nil {
		pr.Repository = p.Repository.FullName
	}
	pr.Repositories = p.Repository.urls()
	src, dst := b.Source.Repository, b.Destination.Repository
	pr.Fork = src == nil || dst != nil && !strings.EqualFold(src.FullName, dst.FullName)
	return pr, nil
}

// bitbucketServerRef is a Bitbucket Server pull request's fromRef or toRef.
type bitbucketServerRef struct {
	ID           string `json:"id"`
	DisplayID    string `json:"displayId"`
	LatestCommit string `json:"latestCommit"`
	Repository   *struct {
		Slug    string `json:"slug"`
		Project struct {
			Key string `json:"key"`
		} `json:"project"`
		Links struct {
			Clone []struct {
				Href string `json:"href"`
			} `json:"clone"`
		} `json:"links"`
	} `json:"repository"`
}

// name is the ref's repository as PROJECT/slug, "" when the payload has
// none.
func (r bitbucketServerRef) name() string {
	if r.Repository == nil || r.Repository.Slug == "" {
		return ""
	}
	return r.Repository.Project.Key + "/" + r.Repository.Slug
}

// bitbucketServerPull is the part of a Bitbucket Server or Data Center
// pr:* payload that is read.
type bitbucketServerPull struct {
	PullRequest struct {
		ID      int64              `json:"id"`
		Title   string             `json:"title"`
		FromRef bitbucketServerRef `json:"fromRef"`
		ToRef   bitbucketServerRef `json:"toRef"`
		Links   struct {
			Self []struct {
				Href string `json:"href"`
			} `json:"self"`
		} `json:"links"`
	} `json:"pullRequest"`
}

func parseBitbucketServerPull(event string, body []byte) (PullRequest, error) {
	var p bitbucketServerPull
	if err := json.Unmarshal(body, &p); err != nil {
		return PullRequest{}, err
	}
	b := p.PullRequest
	pr := PullRequest{Number: b.ID, Title: b.Title, Head: b.FromRef.LatestCommit, Repository: b.ToRef.name(),
		Base:   strings.TrimPrefix(cmp.Or(b.ToRef.ID, b.ToRef.DisplayID), "refs/heads/"),
		Branch: strings.TrimPrefix(cmp.Or(b.FromRef.ID, b.FromRef.DisplayID), "refs/heads/"),
		Ref:    fmt.Sprintf("refs/pull-requests/%d/from", b.ID),
		Fork:   !strings.EqualFold(b.FromRef.name(), b.ToRef.name())}
	if len(b.Links.Self) > 0 {
		pr.URL = b.Links.Self[0].Href
	}
	switch event {
	case "pr:opened":
		pr.Action = PullOpened
	case "pr:from_ref_updated":
		pr.Action = PullSynchronized
	case "pr:merged":
		pr.Action, pr.Merged = PullClosed, true
	case "pr:declined", "pr:deleted":
		pr.Action = PullClosed
	}
	if r := b.ToRef.Repository; r != nil {
		for _, l := range r.Links.Clone {
			pr.Repositories = append(pr.Repositories, l.Href)
		}
	}
	// The pull request's page names the server; its clone URL over HTTP
	// is /scm/<project>/<slug>.git there, which is how repos are written.
	if u, err := url.Parse(pr.URL); err == nil && u.Host != "" && b.ToRef.Repository != nil {
		r := b.ToRef.Repository
		pr.Repositories = append(pr.Repositories, u.Scheme+"://"+u.Host+"/scm/"+strings.ToLower(r.Project.Key)+"/"+r.Slug+".git")
	}
	return pr, nil
}
