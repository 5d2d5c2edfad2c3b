package reconcile

import (
	"sync"

	"github.com/skep-cd/skep/syncpass"
)

// PreviewStatus is one preview release of an application as the last
// pass saw it.
type PreviewStatus = syncpass.PreviewStatus

// previewIndex remembers, by application and commit, the previews the
// passes deployed, so that a notifier asking about the events they raise
// is answered even before the status lists the preview. It is safe for
// concurrent use; the zero value is empty.
type previewIndex struct {
	mu sync.Mutex
	at map[string]previewRef // by application@commit
}

// previewRef is what PreviewAt answers for one deployed commit.
type previewRef struct{ branch, domain string }

// note records that app deploys commit as the preview of branch. Only the
// latest thousand are kept.
func (p *previewIndex) note(app, commit, branch, domain string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil {
		p.at = map[string]previewRef{}
	}
	if len(p.at) > 1000 {
		clear(p.at) // a bound, not a cache policy: old answers are only for late notifiers
	}
	p.at[app+"@"+commit] = previewRef{branch: branch, domain: domain}
}

// PreviewAt reports the branch and domain of the preview application app
// deploys at commit, and false when commit is not deployed as a preview.
// It is safe for concurrent use.
func (c *Controller) PreviewAt(app, commit string) (branch, domain string, ok bool) {
	c.previews.mu.Lock()
	defer c.previews.mu.Unlock()
	r, ok := c.previews.at[app+"@"+commit]
	return r.branch, r.domain, ok
}
