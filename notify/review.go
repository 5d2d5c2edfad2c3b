package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Review is what the plan of a pull request's head posts to its forge: a
// commit status per application on the head, and one comment on the pull
// request, found again by its marker and edited in place.
type Review struct {
	// Repository is the repository as the forge names it, in the form
	// ForgeOptions.Repositories takes ("owner/name", a GitLab project path).
	Repository string
	// Number is the pull request's number (GitLab: the merge request's iid).
	Number int64
	// Head is the commit the statuses are set on.
	Head     string
	Statuses []ReviewStatus
	// Marker is an HTML comment ("<!-- … -->") that Comment carries and
	// that finds the comment again.
	Marker  string
	Comment string
	// EditOnly edits the comment carrying Marker, if there is one, and
	// posts nothing new: what a closed pull request gets.
	EditOnly bool
}

// ReviewStatus is one commit status of a Review.
type ReviewStatus struct {
	// Context names the status (GitLab: its name); one per application.
	Context string
	// Failed sets the failure state, else the status is a success.
	Failed      bool
	Description string
	TargetURL   string
}

// Provider returns the API dialect f speaks.
func (f *Forge) Provider() ForgeProvider { return f.provider }

// Repository returns the repository f reports application app to (its
// most specific route), and false when it reports app nowhere.
func (f *Forge) Repository(app string) (string, bool) {
	for _, r := range f.routes {
		if ok, err := path.Match(r.pattern, app); ok && err == nil {
			return r.repository, true
		}
	}
	return "", false
}

// Review posts r now, outside the event queue: the statuses in order,
// then the comment. It blocks until the forge answered or ctx ends, and
// retries nothing: the plan of the next head posts afresh. The error
// names the first request that failed; the token never appears in it.
func (f *Forge) Review(ctx context.Context, r Review) error {
	if err := CheckRepository(f.provider, r.Repository); err != nil || r.Number <= 0 {
		return fmt.Errorf("review of %q #%d: want a repository and a pull request number", r.Repository, r.Number)
	}
	if !strings.HasPrefix(r.Marker, "<!--") || !strings.Contains(r.Comment, r.Marker) {
		return errors.New("review: the comment must carry its marker, an HTML comment")
	}
	for _, s := range r.Statuses {
		body := statusBody{State: "success", Description: cut(s.Description, f.descriptionLimit()), TargetURL: s.TargetURL}
		switch {
		case s.Failed && f.provider == GitLab:
			body.State = "failed"
		case s.Failed:
			body.State = "failure"
		}
		if f.provider == GitLab {
			body.Name = s.Context
		} else {
			body.Context = s.Context
		}
		if err := f.call(ctx, http.MethodPost, f.repoPath(r.Repository)+"/statuses/"+url.PathEscape(r.Head), body, nil); err != nil {
			return err
		}
	}
	return f.upsert(ctx, r.Repository, r.Number, r.Marker, r.Comment, r.EditOnly)
}
