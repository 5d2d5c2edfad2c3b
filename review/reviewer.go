package review

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/wire"
)

// Controller is what a review asks of the controller;
// *reconcile.Controller implements it. Its methods are called from the
// review's worker and from requests, concurrently.
type Controller interface {
	// ID is the controller's id; a comment's marker carries it, so two
	// controllers planning one repository keep a comment each.
	ID() string
	// Applications lists the running app set's applications.
	Applications() []appset.Application
	// Propose plans app at p.Commit against what its swarm runs, release
	// by release, writing nothing.
	Propose(ctx context.Context, app appset.Application, p reconcile.Proposal) []reconcile.Proposed
}

// Forge is where plans are posted; *notify.Forge implements it.
type Forge interface {
	// Provider is the forge's API dialect.
	Provider() notify.ForgeProvider
	// Repository is the repository the forge reports app to.
	Repository(app string) (string, bool)
	// Review posts statuses and upserts the comment, now.
	Review(ctx context.Context, r notify.Review) error
}

// AppSet is the git source of the running app set: a pull request into
// its repository and revision that changes files under Path is planned
// with the application definitions of its head.
type AppSet struct {
	Repo, Revision, Path string
}

// Defaults of Options.
const (
	DefaultQueue      = 32
	DefaultKeep       = 256
	DefaultTimeout    = 5 * time.Minute
	DefaultMaxComment = 60_000
)

// Options wire a Reviewer. Controller and Git are required; the zero value
// of every other field means its default or "none".
type Options struct {
	Controller Controller
	Git        *gitsource.Cache
	// AppSet is the running app set's git source; nil when the set comes
	// from a file or a directory.
	AppSet *AppSet
	// Forges get the plans of pull requests of their own dialect, into the
	// repositories their routes name.
	Forges []Forge
	// UI is the base URL people open the UI at; the comment and each
	// status link an application's pull requests there. "" links nothing.
	UI string
	// Queue bounds the pull requests waiting to be planned (DefaultQueue);
	// a newer event of a waiting pull request takes its place instead.
	Queue int
	// Keep bounds the pull requests remembered for the API (DefaultKeep);
	// the least recently planned go first.
	Keep int
	// Timeout bounds the plan of one pull request (DefaultTimeout).
	Timeout time.Duration
	// MaxComment bounds a comment's size in bytes (DefaultMaxComment);
	// plans that do not fit are left to the UI.
	MaxComment int
	// Now is the clock PlannedAt is read from; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Reviewer plans pull requests in the background and keeps the plans of
// the open ones. Build it with New and start Run; its methods are safe for
// concurrent use.
type Reviewer struct {
	opts Options

	mu      sync.Mutex
	waiting map[string]api.PullRequest // the latest event of each pull request waiting, by Key
	order   []string                   // keys of waiting, first come first
	pulls   map[string]*pull           // open pull requests, by Key
	seq     uint64
	wake    chan struct{}
}

// pull is what is known of one open pull request.
type pull struct {
	pr      api.PullRequest // its latest event
	apps    []string        // the applications its repository and base name
	queued  bool            // its latest head waits to be planned
	head    string          // the head last planned
	at      time.Time
	plans   map[string]wire.Proposal // of head, by application
	touched uint64                   // seq of the last event or plan, for newest first and eviction
}

// New checks opts and returns a Reviewer; nothing is planned until Run.
func New(opts Options) (*Reviewer, error) {
	if opts.Controller == nil || opts.Git == nil {
		return nil, fmt.Errorf("review: a controller and a git cache are required")
	}
	opts.Queue = cmp.Or(max(opts.Queue, 0), DefaultQueue)
	opts.Keep = cmp.Or(max(opts.Keep, 0), DefaultKeep)
	opts.Timeout = cmp.Or(max(opts.Timeout, 0), DefaultTimeout)
	opts.MaxComment = cmp.Or(max(opts.MaxComment, 0), DefaultMaxComment)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reviewer{opts: opts, waiting: map[string]api.PullRequest{}, pulls: map[string]*pull{}, wake: make(chan struct{}, 1)}, nil
}

var _ api.Reviews = (*Reviewer)(nil)

// Review implements api.Reviews: it queues pr, replacing an event of the
// same pull request still waiting, and names the applications whose
// repository pr merges into. A pull request naming none, where the app
// set is not either, is not queued. It does no I/O.
func (r *Reviewer) Review(pr api.PullRequest) ([]string, error) {
	apps, appSet := r.candidates(pr)
	if len(apps) == 0 && !appSet {
		return nil, nil
	}
	key := pr.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.waiting[key]; !ok {
		if len(r.waiting) >= r.opts.Queue {
			return nil, fmt.Errorf("%w: %d pull requests wait to be planned; retry later", api.ErrUnavailable, len(r.waiting))
		}
		r.order = append(r.order, key)
	}
	r.waiting[key] = pr
	p := r.pulls[key]
	if p == nil && pr.Action != api.PullClosed {
		p = &pull{}
		r.pulls[key] = p
	}
	if p != nil {
		r.seq++
		p.pr, p.apps, p.touched = pr, apps, r.seq
		p.queued = pr.Action != api.PullClosed && !sameCommit(pr.Head, p.head)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return apps, nil
}

// Run plans the waiting pull requests one at a time until ctx ends; start
// it once. It returns when ctx is done.
func (r *Reviewer) Run(ctx context.Context) {
	for {
		pr, ok := r.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
			}
			continue
		}
		r.process(ctx, pr)
	}
}

// next takes the first waiting event; ok is false when none waits.
func (r *Reviewer) next() (api.PullRequest, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == 0 {
		return api.PullRequest{}, false
	}
	key := r.order[0]
	r.order = r.order[1:]
	pr := r.waiting[key]
	delete(r.waiting, key)
	return pr, true
}

// process plans pr's head (or says it closed) and posts the result. A
// panic is logged and ends this pull request's plan, not the worker.
func (r *Reviewer) process(ctx context.Context, pr api.PullRequest) {
	log := r.opts.Logger.With("pull_request", pr.Key())
	defer func() {
		if v := recover(); v != nil {
			log.Error("pull request plan panicked", "err", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	if pr.Action == api.PullClosed {
		r.close(ctx, log, pr)
		return
	}
	if r.planned(pr) {
		log.Debug("pull request head already planned", "revision", pr.Head)
		return
	}
	out := r.planPull(ctx, pr)
	if ctx.Err() != nil && len(out.plans) == 0 {
		log.Warn("pull request plan cut short", "err", ctx.Err())
		return
	}
	r.keep(pr, out)
	log.Info("pull request planned", "revision", out.head, "applications", len(out.plans))
	r.post(ctx, log, pr, out)
}

// planned reports whether pr's head is the one its pull request was last
// planned at: a redelivery, an edit of its title, a force-push back.
func (r *Reviewer) planned(pr api.PullRequest) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pulls[pr.Key()]
	return p != nil && p.head != "" && sameCommit(pr.Head, p.head)
}

// keep records out as pr's plan, and forgets the least recently touched
// pull requests beyond Keep.
func (r *Reviewer) keep(pr api.PullRequest, out result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pulls[pr.Key()]
	if p == nil {
		return // closed meanwhile
	}
	r.seq++
	p.head, p.at, p.touched = out.head, r.opts.Now(), r.seq
	p.queued = !sameCommit(p.pr.Head, out.head)
	p.plans = map[string]wire.Proposal{}
	for _, a := range out.plans {
		p.plans[a.name] = a.proposal
		if !slices.Contains(p.apps, a.name) {
			p.apps = append(p.apps, a.name)
		}
	}
	for len(r.pulls) > r.opts.Keep {
		var oldest string
		for k, q := range r.pulls {
			if oldest == "" || q.touched < r.pulls[oldest].touched {
				oldest = k
			}
		}
		delete(r.pulls, oldest)
	}
}

// PullRequests implements api.Reviews.
func (r *Reviewer) PullRequests(app string) ([]wire.PullRequest, error) {
	if !slices.ContainsFunc(r.opts.Controller.Applications(), func(a appset.Application) bool { return a.Name == app }) {
		return nil, fmt.Errorf("%w: application %s", api.ErrNotFound, app)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var list []*pull
	for _, p := range r.pulls {
		if slices.Contains(p.apps, app) {
			list = append(list, p)
		}
	}
	slices.SortFunc(list, func(a, b *pull) int { return cmp.Compare(b.touched, a.touched) })
	out := make([]wire.PullRequest, 0, len(list))
	for _, p := range list {
		w := wire.PullRequest{Provider: p.pr.Provider, Repository: p.pr.Repository, Number: p.pr.Number, Title: p.pr.Title, URL: p.pr.URL,
			Base: p.pr.Base, Branch: p.pr.Branch, Head: p.pr.Head, Fork: p.pr.Fork, State: wire.PullPlanned}
		if p.queued {
			w.State = wire.PullQueued
		}
		if plan, ok := p.plans[app]; ok {
			at := p.at.UTC()
			w.PlannedAt, w.Plan = &at, &plan
		}
		out = append(out, w)
	}
	return out, nil
}

// sameCommit reports whether a and b name one commit, one of them maybe
// abbreviated (Bitbucket Cloud's twelve digits).
func sameCommit(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	n := min(len(a), len(b))
	return n >= 7 && a[:n] == b[:n]
}
