package review

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/wire"
)

// StatusContext is the commit status an application's plan sets on a
// pull request's head; the deploy statuses of the forge notifier keep
// their own contexts, so a plan never stands for a deploy.
func StatusContext(app string) string { return "skep/plan/" + app }

// locatedAt finds where a message says the input is wrong: the first
// "file.ext:line:" in it.
var locatedAt = regexp.MustCompile(`[\w./@-]+\.\w+:\d+(:\d+)?: `)

// located is msg from its first "file:line:" on, which is what a status's
// short description must keep; msg itself when it names no line.
func located(msg string) string {
	if loc := locatedAt.FindStringIndex(msg); loc != nil {
		return msg[loc[0]:]
	}
	return msg
}

// describe is the status description of an application's plan.
func describe(p wire.Proposal) string {
	switch {
	case p.Error != "":
		return p.Error
	case p.Changes == 0:
		return "no change"
	case p.Changes == 1:
		return "1 change"
	}
	return fmt.Sprintf("%d changes", p.Changes)
}

// marker finds this controller's comment on a pull request again.
func (r *Reviewer) marker() string {
	id := strings.NewReplacer("--", "-", ">", "").Replace(r.opts.Controller.ID())
	return "<!-- skep-plan:" + id + " -->"
}

// link is where the UI shows app's pull requests; "" without a UI.
func (r *Reviewer) link(app string) string {
	if r.opts.UI == "" {
		return ""
	}
	return strings.TrimRight(r.opts.UI, "/") + "/#/app/" + url.PathEscape(app) + "/pulls"
}

// post sends out to every forge that reports pr's repository.
func (r *Reviewer) post(ctx context.Context, log *slog.Logger, pr api.PullRequest, out result) {
	names := make([]string, 0, len(out.plans))
	for _, a := range out.plans {
		names = append(names, a.name)
	}
	forges := r.forgesFor(pr, names)
	if len(forges) == 0 {
		log.Debug("no forge notifier reports the pull request's repository", "repository", pr.Repository)
		return
	}
	rv := notify.Review{Repository: pr.Repository, Number: pr.Number, Head: out.head, Marker: r.marker(),
		Comment: r.comment(pr, out), EditOnly: len(out.plans) == 0 && len(out.left) == 0}
	// A status needs the whole commit id, which an abbreviated head that
	// could not be fetched does not give.
	if len(out.head) == 40 || len(out.head) == 64 {
		for _, a := range out.plans {
			rv.Statuses = append(rv.Statuses, notify.ReviewStatus{Context: StatusContext(a.name), Failed: a.proposal.Error != "",
				Description: describe(a.proposal), TargetURL: r.link(a.name)})
		}
	}
	for _, f := range forges {
		if err := f.Review(ctx, rv); err != nil {
			log.Warn("pull request plan not posted", "err", err)
		}
	}
}

// close says on pr's comment that it closed, posting nothing new, and
// forgets its plans.
func (r *Reviewer) close(ctx context.Context, log *slog.Logger, pr api.PullRequest) {
	r.mu.Lock()
	p := r.pulls[pr.Key()]
	delete(r.pulls, pr.Key())
	r.mu.Unlock()
	apps, _ := r.candidates(pr)
	if p != nil {
		apps = append(apps, p.apps...)
	}
	what := "closed"
	if pr.Merged {
		what = "merged"
	}
	text := fmt.Sprintf("%s\n### Skep plan\n\nThis pull request was %s: Skep plans it no more.\n", r.marker(), what)
	rv := notify.Review{Repository: pr.Repository, Number: pr.Number, Marker: r.marker(), Comment: text, EditOnly: true}
	for _, f := range r.forgesFor(pr, apps) {
		if err := f.Review(ctx, rv); err != nil {
			log.Warn("pull request close not posted", "err", err)
		}
	}
	log.Info("pull request closed", "merged", pr.Merged)
}

// dialect is the forge API of a webhook provider; "" for one no forge
// notifier speaks.
func dialect(provider string) notify.ForgeProvider {
	switch provider {
	case api.ProviderGitHub:
		return notify.GitHub
	case api.ProviderGitLab:
		return notify.GitLab
	case api.ProviderGitea, api.ProviderForgejo, api.ProviderGogs:
		return notify.Gitea
	}
	return ""
}

// forgesFor are the forges of pr's dialect that report one of apps to
// pr's repository: their token is for it.
func (r *Reviewer) forgesFor(pr api.PullRequest, apps []string) []Forge {
	var out []Forge
	for _, f := range r.opts.Forges {
		if f.Provider() != dialect(pr.Provider) {
			continue
		}
		if slices.ContainsFunc(apps, func(app string) bool {
			repo, ok := f.Repository(app)
			return ok && strings.EqualFold(repo, pr.Repository)
		}) {
			out = append(out, f)
		}
	}
	return out
}

// comment is the pull request's comment: a table of every application and
// release, then each plan folded, within MaxComment bytes; what does not
// fit is left to the UI.
func (r *Reviewer) comment(pr api.PullRequest, out result) string {
	var head, table, foot strings.Builder
	fmt.Fprintf(&head, "%s\n### Skep: what merging this would change in the swarm\n\n", r.marker())
	fmt.Fprintf(&head, "Head `%s`, planned against what the swarm runs now.", gitsource.ShortCommit(out.head))
	if pr.Fork {
		head.WriteString(" From a fork: encrypted values were not decrypted, and show as changed where their ciphertext changed; artifact files are read as the branch has them.")
	}
	head.WriteString("\n\n")
	if len(out.plans) == 0 && len(out.left) == 0 {
		head.WriteString("This pull request changes the inputs of no application.\n")
		return head.String()
	}
	table.WriteString("| Application | Release | Plan |\n|---|---|---|\n")
	for _, a := range out.plans {
		for _, rel := range a.proposal.Releases {
			fmt.Fprintf(&table, "| `%s` | `%s` | %s |\n", a.name, rel.Name, cell(rel))
		}
	}
	for _, name := range out.left {
		fmt.Fprintf(&table, "| `%s` | | leaves the app set |\n", name)
	}
	if len(out.plans) > 0 {
		if link := r.link(out.plans[0].name); link != "" {
			fmt.Fprintf(&foot, "\nEvery plan, whole: [Skep](%s)\n", link)
		}
	}
	budget := r.opts.MaxComment - head.Len() - foot.Len() - 200
	body := table.String()
	if len(body) > budget {
		body = cutLines(body, budget) + "\n… more releases than a comment holds.\n"
	}
	var details strings.Builder
	left := 0
	for _, a := range out.plans {
		for _, rel := range a.releases {
			if !rel.Changed() {
				continue
			}
			block := fold(a.name, rel)
			if left > 0 || len(body)+details.Len()+len(block) > budget {
				left++
				continue
			}
			details.WriteString(block)
		}
	}
	if left > 0 {
		fmt.Fprintf(&details, "\nThe plans of %d more releases do not fit in a comment.\n", left)
	}
	return head.String() + body + details.String() + foot.String()
}

// cell is a release's plan in the summary table.
func cell(rel wire.ProposedRelease) string {
	if rel.Error != "" {
		return "**failed**: " + escapeCell(located(rel.Error))
	}
	n := len(rel.Changes)
	switch n {
	case 0:
		return "no change"
	case 1:
		return "1 change (" + escapeCell(rel.Reason) + ")"
	}
	return fmt.Sprintf("%d changes (%s)", n, escapeCell(rel.Reason))
}

// escapeCell keeps s on one line of a table cell.
func escapeCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", "").Replace(s)
}

// fold is one release's plan, folded under a summary line.
func fold(app string, rel plan.Release) string {
	var text strings.Builder
	_ = plan.Render(&text, []plan.Release{rel}) // a strings.Builder does not fail
	for _, name := range rotated(rel) {
		fmt.Fprintf(&text, "  secret %s changed: its value is never shown\n", name)
	}
	body := strings.ReplaceAll(text.String(), "````", "'''")
	n := len(rel.Changes)
	what := fmt.Sprintf("%d changes", n)
	if n == 1 {
		what = "1 change"
	}
	return fmt.Sprintf("\n<details><summary><code>%s</code> · release <code>%s</code>: %s</summary>\n\n````text\n%s````\n\n</details>\n", app, rel.Name, what, body)
}

// cutLines is s cut at a line end within n bytes.
func cutLines(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return ""
}

// contentSuffix is the digest a secret's name ends in: a secret cannot
// change, so new content is a new secret.
var contentSuffix = regexp.MustCompile(`-[0-9a-f]{10}$`)

// rotated names the secrets of rel that a plan creates anew and deletes
// under one name: their content changed.
func rotated(rel plan.Release) []string {
	deleted := map[string]bool{}
	for _, c := range rel.Changes {
		if c.Kind == plan.KindSecret && c.Op == plan.Delete {
			deleted[contentSuffix.ReplaceAllString(c.Name, "")] = true
		}
	}
	var out []string
	for _, c := range rel.Changes {
		if name := contentSuffix.ReplaceAllString(c.Name, ""); c.Kind == plan.KindSecret && c.Op == plan.Create && deleted[name] {
			out = append(out, name)
		}
	}
	return out
}
