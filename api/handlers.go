package api

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/wire"
)

// table is the route table: every route the server has, once. The
// OpenAPI document describes exactly these (TestOpenAPIDescribesEveryRoute).
func (s *Server) table() []route {
	return []route{
		{method: "GET", pattern: "/healthz", handle: s.healthz},
		{method: "GET", pattern: "/readyz", handle: s.readyz},
		{method: "GET", pattern: "/metrics", need: RoleAdmin, handle: s.serveMetrics},
		{method: "GET", pattern: "/api/v1/version", need: RoleViewer, handle: s.version},
		{method: "GET", pattern: "/api/v1/swarms", need: RoleViewer, handle: s.swarms},
		{method: "GET", pattern: "/api/v1/whoami", need: RoleViewer, handle: s.whoami},
		{method: "GET", pattern: "/api/v1/status", need: RoleViewer, handle: s.status},
		{method: "GET", pattern: "/api/v1/applications", need: RoleViewer, handle: s.list},
		{method: "GET", pattern: "/api/v1/applications/{name}", need: RoleViewer, app: true, handle: s.get},
		{method: "GET", pattern: "/api/v1/applications/{name}/diff", need: RoleViewer, app: true, handle: s.diff},
		{method: "GET", pattern: "/api/v1/applications/{name}/history", need: RoleViewer, app: true, handle: s.history},
		{method: "GET", pattern: "/api/v1/applications/{name}/pulls", need: RoleViewer, app: true, handle: s.pulls},
		{method: "POST", pattern: "/api/v1/applications/{name}/plan", need: RoleDeployer, app: true, handle: s.plan},
		{method: "POST", pattern: "/api/v1/applications/{name}/sync", need: RoleDeployer, app: true, handle: s.sync},
		{method: "POST", pattern: "/api/v1/applications/{name}/rollback", need: RoleDeployer, app: true, handle: s.rollback},
		{method: "POST", pattern: "/api/v1/applications/{name}/refresh", need: RoleDeployer, app: true, handle: s.refresh},
		{method: "POST", pattern: "/api/v1/applications/{name}/unhold", need: RoleDeployer, app: true, handle: s.unhold},
		{method: "POST", pattern: "/api/v1/applications/{name}/promote", need: RoleDeployer, app: true, handle: s.canary("promote")},
		{method: "POST", pattern: "/api/v1/applications/{name}/abort", need: RoleDeployer, app: true, handle: s.canary("abort")},
		{method: "GET", pattern: "/api/v1/events", need: RoleViewer, handle: s.eventsRoute},
		{method: "POST", pattern: "/api/v1/webhooks/{provider}", handle: s.webhook},
		{method: "GET", pattern: "/api/v1/auth", handle: s.authMethods},
		{method: "GET", pattern: LoginPath, handle: s.signInStart},
		{method: "GET", pattern: "/api/v1/auth/oidc/callback", handle: s.signInFinish},
		{method: "POST", pattern: "/api/v1/auth/signout", handle: s.signOut},
	}
}

// healthz is liveness: it asks nothing of the controller, so a slow swarm
// or forge never gets a healthy controller restarted.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ Subject) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is readiness: 503 until the first app set is loaded and while the
// swarm does not answer.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ Subject) {
	if err := s.rec.Ready(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// serveMetrics serves the Prometheus registry; the route table restricts
// it to admins, since label values name every application.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ Subject) {
	s.metrics.Handler().ServeHTTP(w, r)
}

// version names the build and the capabilities clients adapt to.
func (s *Server) version(w http.ResponseWriter, _ *http.Request, _ Subject) {
	writeJSON(w, http.StatusOK, s.versionInfo())
}

// whoami names the caller's role and application scope, so the UI offers
// only the actions the token may take. A session's caller also gets the
// CSRF token its later requests carry: only the page of this origin can
// read the answer.
func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, subj Subject) {
	apps := subj.Apps
	if apps == nil {
		apps = []string{}
	}
	out := wire.Whoami{Name: subj.Name, Role: string(subj.Role), Apps: apps}
	if subj.Session.CSRFToken != "" {
		out.Session = &wire.WhoamiSession{CSRFToken: subj.Session.CSRFToken, ExpiresAt: subj.Session.Expires.UTC()}
	}
	writeJSON(w, http.StatusOK, out)
}

// status describes the controller. The details (node and cluster ids,
// Engine version, git counters) are for admins: they help an attacker
// more than a viewer.
func (s *Server) status(w http.ResponseWriter, r *http.Request, subj Subject) {
	st, err := s.rec.Status(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !subj.Allows(RoleAdmin) {
		st.Details = nil
	}
	// A scoped token learns nothing of applications outside its scope, not
	// even that their releases linger (see TestScopedTokenSeesOnlyItsApplications).
	st.Orphaned = slices.DeleteFunc(st.Orphaned, func(name string) bool { return !subj.Sees(name) })
	st.Pruned = slices.DeleteFunc(st.Pruned, func(name string) bool { return !subj.Sees(name) })
	st.OrphanedReleases = slices.DeleteFunc(st.OrphanedReleases, func(r wire.OrphanedRelease) bool { return !subj.Sees(r.Application) })
	if s.notifiers != nil {
		st.Notifiers = s.notifiers()
	}
	if st.Swarms == nil {
		st.Swarms = []wire.Swarm{}
	}
	if s.store != nil {
		store := s.store()
		st.Store = &store
	}
	if s.repl != nil {
		st.Replication = s.repl()
		// Where the replicas listen is for admins, as the details are.
		if st.Replication != nil && !subj.Allows(RoleAdmin) {
			st.Replication.Leader = withoutAddr(st.Replication.Leader)
			for i := range st.Replication.Replicas {
				st.Replication.Replicas[i].Addr = ""
			}
		}
	}
	writeJSON(w, http.StatusOK, st)
}

// withoutAddr returns a copy of r without its address; nil stays nil.
func withoutAddr(r *wire.Replica) *wire.Replica {
	if r == nil {
		return nil
	}
	c := *r
	c.Addr = ""
	return &c
}

// swarms lists the destinations and their state; it is the status's
// swarms, served on its own for `skep swarm list` and the UI.
func (s *Server) swarms(w http.ResponseWriter, r *http.Request, _ Subject) {
	st, err := s.rec.Status(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if st.Swarms == nil {
		st.Swarms = []wire.Swarm{}
	}
	writeJSON(w, http.StatusOK, wire.SwarmList{Swarms: st.Swarms})
}

// list lists the applications the subject sees; the others are left out
// rather than refused, so a scoped token still gets a useful list.
func (s *Server) list(w http.ResponseWriter, r *http.Request, subj Subject) {
	list, err := s.rec.ListApplications(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// ?swarm= keeps one destination's applications; present and empty is
	// the local swarm.
	q := r.URL.Query()
	_, bySwarm := q["swarm"]
	visible := make([]wire.Application, 0, len(list.Applications))
	for _, a := range list.Applications {
		if bySwarm && a.Swarm != q.Get("swarm") {
			continue
		}
		if subj.Sees(a.Name) {
			visible = append(visible, a)
		}
	}
	list.Applications = visible
	writeJSON(w, http.StatusOK, list)
}

// get returns one application; the guard has checked the subject sees it.
func (s *Server) get(w http.ResponseWriter, r *http.Request, _ Subject) {
	d, err := s.rec.Application(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// diff plans the application at ?revision= (default: what it tracks).
func (s *Server) diff(w http.ResponseWriter, r *http.Request, _ Subject) {
	d, err := s.rec.Diff(r.Context(), r.PathValue("name"), r.URL.Query().Get("revision"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// historyLimit is how many store syncs the history route returns by default.
const historyLimit = 50

// history merges the revisions recorded in the swarm with the store's sync
// history. The store part is best effort: when it fails the revisions are
// still answered and SyncsError says why.
func (s *Server) history(w http.ResponseWriter, r *http.Request, _ Subject) {
	name := r.PathValue("name")
	h, err := s.rec.History(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit := historyLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, "limit: want a positive integer, got "+strconv.Quote(v))
			return
		}
		limit = n
	}
	if h.Syncs == nil {
		h.Syncs = []wire.HistorySync{}
	}
	if why := s.notKept(); why != "" {
		h.SyncsError = "sync history is not kept: " + why
	}
	if s.syncs != nil {
		syncs, err := s.syncs.History(r.Context(), name, limit)
		if err != nil {
			h.SyncsError = err.Error()
		}
		for _, sy := range syncs {
			hs := wire.HistorySync{ID: sy.ID, Revision: sy.Revision, Actor: sy.Actor, StartedAt: sy.Started.UTC(),
				Outcome: string(sy.Outcome), Summary: sy.Summary, Result: sy.Result, Error: sy.Error}
			if !sy.Finished.IsZero() {
				f := sy.Finished.UTC()
				hs.FinishedAt = &f
			}
			h.Syncs = append(h.Syncs, hs)
		}
	}
	writeJSON(w, http.StatusOK, h)
}

// sync queues a sync (202) or, for a dry run, answers the plan (200): a
// dry run has its whole answer already and nothing is left to wait for.
func (s *Server) sync(w http.ResponseWriter, r *http.Request, subj Subject) {
	var opts wire.SyncOptions
	if err := s.decodeBody(w, r, &opts); err != nil {
		s.failBody(w, r, err)
		return
	}
	ctx := notify.WithActor(r.Context(), subj.Name)
	resp, err := s.rec.Sync(ctx, r.PathValue("name"), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	code := http.StatusAccepted
	if resp.Status == wire.SyncPlanned {
		code = http.StatusOK
	}
	writeJSON(w, code, resp)
}

// rollback queues a sync to a recorded revision and holds the
// application there until unhold.
func (s *Server) rollback(w http.ResponseWriter, r *http.Request, subj Subject) {
	var opts wire.RollbackOptions
	if err := s.decodeBody(w, r, &opts); err != nil {
		s.failBody(w, r, err)
		return
	}
	ctx := notify.WithActor(r.Context(), subj.Name)
	resp, err := s.rec.Rollback(ctx, r.PathValue("name"), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, resp)
}

// refresh makes the controller re-read git for the application; nothing is
// applied unless the application is automated.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, subj Subject) {
	name := r.PathValue("name")
	if err := s.rec.Refresh(notify.WithActor(r.Context(), subj.Name), name); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, wire.RefreshResponse{Application: name, Status: wire.SyncQueued})
}

// canary asks the application's running canary to be promoted or aborted
// (action), by the subject: 409 when none runs.
func (s *Server) canary(action string) func(http.ResponseWriter, *http.Request, Subject) {
	return func(w http.ResponseWriter, r *http.Request, subj Subject) {
		resp, err := s.rec.Canary(notify.WithActor(r.Context(), subj.Name), r.PathValue("name"), action)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusAccepted, resp)
	}
}

// unhold releases a rollback's hold, so the application follows git again.
func (s *Server) unhold(w http.ResponseWriter, r *http.Request, subj Subject) {
	name := r.PathValue("name")
	if err := s.rec.Unhold(notify.WithActor(r.Context(), subj.Name), name); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, wire.RefreshResponse{Application: name, Status: wire.SyncQueued})
}
