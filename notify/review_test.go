package notify

import (
	"testing"
)

// A review sets one status per application on the head, then keeps one
// comment on the pull request: edited where its marker is, posted where
// it is not; a closed pull request's review edits and never posts.
func TestForgeReviewPostsStatusesAndUpsertsOneComment(t *testing.T) {
	const marker = "<!-- skep-plan:ctl -->"
	comment := marker + "\nplan"
	review := Review{Repository: "acme/web", Number: 7, Head: sha, Marker: marker, Comment: comment, Statuses: []ReviewStatus{
		{Context: "skep/plan/web", Description: "2 changes", TargetURL: "https://skep.example.org/#/apps/web/pulls"},
		{Context: "skep/plan/api", Failed: true, Description: "compose.yaml:3: services.api.image: want a string"},
	}}
	for _, tc := range []struct {
		name     string
		provider ForgeProvider
		repo     string
		review   Review
		script   []exchange
	}{
		{name: "github edits the comment carrying the marker", provider: GitHub, review: review, script: []exchange{
			{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"success","context":"skep/plan/web","description":"2 changes","target_url":"https://skep.example.org/#/apps/web/pulls"}`},
			{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"failure","context":"skep/plan/api","description":"compose.yaml:3: services.api.image: want a string"}`},
			{method: "GET", uri: "/repos/acme/web/issues/7/comments?page=1&per_page=100", answer: `[{"id":1,"body":"lgtm"},{"id":42,"body":"` + marker + `\nold"}]`},
			{method: "PATCH", uri: "/repos/acme/web/issues/comments/42", body: `{"body":"` + marker + `\nplan"}`},
		}},
		{name: "gitlab names its statuses and posts the first note", provider: GitLab, review: func() Review { r := review; r.Repository = "group/web"; return r }(), script: []exchange{
			{method: "POST", uri: "/projects/group%2Fweb/statuses/" + sha, body: `{"state":"success","name":"skep/plan/web","description":"2 changes","target_url":"https://skep.example.org/#/apps/web/pulls"}`},
			{method: "POST", uri: "/projects/group%2Fweb/statuses/" + sha, body: `{"state":"failed","name":"skep/plan/api","description":"compose.yaml:3: services.api.image: want a string"}`},
			{method: "GET", uri: "/projects/group%2Fweb/merge_requests/7/notes?page=1&per_page=100", answer: `[]`},
			{method: "POST", uri: "/projects/group%2Fweb/merge_requests/7/notes", body: `{"body":"` + marker + `\nplan"}`},
		}},
		{name: "gitea closed: edits only, posts no status and no new comment", provider: Gitea,
			review: Review{Repository: "acme/web", Number: 7, Marker: marker, Comment: marker + "\nclosed", EditOnly: true}, script: []exchange{
				{method: "GET", uri: "/repos/acme/web/issues/7/comments?limit=100&page=1", answer: `[]`},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[ForgeProvider]map[string][]string{GitHub: githubHeaders, GitLab: gitlabHeaders, Gitea: giteaHeaders}[tc.provider]
			srv := newScriptedForge(t, headers, tc.script...)
			f, err := NewForge(ForgeOptions{Name: "forge", Provider: tc.provider, URL: srv.URL, Token: token,
				Repositories: map[string]string{"*": tc.review.Repository}, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Review(t.Context(), tc.review); err != nil {
				t.Fatal(err)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if srv.done != len(srv.script) {
				t.Errorf("%d of %d requests made", srv.done, len(srv.script))
			}
		})
	}
}

func TestForgeReviewRefusesACommentWithoutItsMarker(t *testing.T) {
	f, err := NewForge(ForgeOptions{Name: "forge", Provider: GitHub, URL: "http://127.0.0.1:1", Token: token, Repositories: map[string]string{"web": "acme/web"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Review(t.Context(), Review{Repository: "acme/web", Number: 1, Marker: "<!-- m -->", Comment: "no marker"}); err == nil {
		t.Error("Review of a comment without its marker succeeded")
	}
	if repo, ok := f.Repository("web"); !ok || repo != "acme/web" {
		t.Errorf("Repository(web) = %q, %v", repo, ok)
	}
	if _, ok := f.Repository("api"); ok {
		t.Error("Repository(api) found a route")
	}
}
