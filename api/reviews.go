package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/skep-cd/skep/wire"
)

// Reviews plans pull requests, and the revisions CI jobs ask about, as
// merging them would deploy them; *review.Reviewer implements it. Its
// methods are called concurrently from requests. Errors wrap ErrNotFound,
// ErrInvalid or ErrUnavailable to choose the status code, as Reconciler's
// do.
type Reviews interface {
	// Review queues pr's plan and returns at once with the applications
	// whose repository and branch pr merges into; it does no I/O. An error
	// wrapping ErrUnavailable says its queue is full: the forge retries.
	Review(pr PullRequest) ([]string, error)
	// PullRequests lists the open pull requests that change application
	// app, newest first, each with app's plan when one was made; the slice
	// is the caller's. An unknown application wraps ErrNotFound.
	PullRequests(app string) ([]wire.PullRequest, error)
	// Plan plans application app at revision (a branch, tag, commit or
	// pull request ref) as a pull request's head is planned. A plan that
	// does not render is an answer (Proposal.Error), not an error.
	Plan(ctx context.Context, app, revision string) (wire.Proposal, error)
}

// errNoReviews answers the plan route of a server without Reviews.
var errNoReviews = fmt.Errorf("%w: this controller makes no plans of revisions", ErrUnavailable)

// pulls lists the open pull requests that change the application; a
// server without Reviews knows none.
func (s *Server) pulls(w http.ResponseWriter, r *http.Request, _ Subject) {
	name := r.PathValue("name")
	list := wire.PullRequestList{Application: name, PullRequests: []wire.PullRequest{}}
	var (
		pulls []wire.PullRequest
		err   error
	)
	if s.reviews != nil {
		pulls, err = s.reviews.PullRequests(name)
	} else {
		_, err = s.rec.Application(r.Context(), name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list.PullRequests = append(list.PullRequests, pulls...)
	writeJSON(w, http.StatusOK, list)
}

// plan answers the plan of the application at the body's revision:
// rendered with what a merge would give, against what the swarm runs.
func (s *Server) plan(w http.ResponseWriter, r *http.Request, _ Subject) {
	var req wire.PlanRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.failBody(w, r, err)
		return
	}
	if req.Revision == "" {
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, "revision: want a branch, tag, commit or pull request ref")
		return
	}
	if s.reviews == nil {
		s.fail(w, r, errNoReviews)
		return
	}
	p, err := s.reviews.Plan(r.Context(), r.PathValue("name"), req.Revision)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// pullRequest takes a verified pull-request delivery: parse, drop a
// duplicate, queue its plan, and answer at once.
func (s *Server) pullRequest(w http.ResponseWriter, r *http.Request, provider string, body []byte) {
	pr, ignored, err := ParsePullRequest(provider, r.Header, body)
	switch {
	case err != nil:
		s.metrics.webhook(provider, webhookBadPayload)
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("%s webhook: %v", provider, err))
		return
	case ignored == "" && s.reviews == nil:
		ignored = "this controller plans no pull requests"
	}
	if ignored != "" {
		s.metrics.webhook(provider, webhookIgnored)
		writeJSON(w, http.StatusOK, WebhookResponse{Status: webhookIgnored, Reason: ignored})
		return
	}
	id := DeliveryID(provider, r.Header)
	if id != "" && !s.webhooks.seen.add(provider+"/"+id) {
		s.metrics.webhook(provider, webhookDuplicate)
		writeJSON(w, http.StatusOK, WebhookResponse{Status: webhookDuplicate})
		return
	}
	apps, err := s.reviews.Review(pr)
	if err != nil {
		if id != "" {
			s.webhooks.seen.remove(provider + "/" + id) // let the retry through
		}
		if errors.Is(err, ErrUnavailable) {
			s.metrics.webhook(provider, webhookBusy)
			w.Header().Set("Retry-After", "10")
		}
		s.fail(w, r, err)
		return
	}
	s.metrics.webhook(provider, webhookAccepted)
	writeJSON(w, http.StatusAccepted, WebhookResponse{Status: webhookAccepted, Applications: apps, PullRequest: pr.Number})
}
