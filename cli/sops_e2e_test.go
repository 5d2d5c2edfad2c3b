package cli_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/sops"
)

// lockedBuffer collects a subprocess's output written from two goroutines
// and passes it on to the test's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	return b.out.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// plaintext is a secret value unique to this run, so finding it anywhere
// can only mean it leaked.
func plaintext(t *testing.T, what string) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return what + "-" + hex.EncodeToString(b)
}

// sopsRelease is one commit's secrets: every file encrypted to recipient
// with sops.Encrypt (the format of the sops tool, held to it by the sops
// package's fixtures). rev is a short value whose digits the image and
// the controller's labels hold in plain too; it is masked only in the
// fields made from it.
type sopsRelease struct {
	dbPassword, apiToken, dbSecret, tlsKey string
	rev                                    string
}

// values are the secrets a search must not find: all but rev, which is
// too short to search for.
func (r sopsRelease) values() []string {
	return []string{r.dbPassword, r.apiToken, r.dbSecret, r.tlsKey}
}

func (r sopsRelease) files(t *testing.T, recipient string) map[string]string {
	t.Helper()
	plain := map[string]string{
		".env":        "DB_PASSWORD=" + r.dbPassword + "\nREV=" + r.rev + "\n",
		"app.enc.env": "API_TOKEN=" + r.apiToken + "\n",
		"db.enc.yaml": "user: app\npassword: " + r.dbSecret + "\n",
		"tls.key.enc": "-----BEGIN PRIVATE KEY-----\n" + r.tlsKey + "\n-----END PRIVATE KEY-----\n",
	}
	out := map[string]string{}
	for name, content := range plain {
		enc, err := sops.Encrypt(name, []byte(content), recipient)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(enc)
	}
	return out
}

// The proof of issue 17's encrypted secrets, on a real swarm with the real
// binary: SOPS files in git become a Swarm secret whose content the task
// reads back, environment values and interpolation variables; a rotation
// shows in the diff as changed only; a tampered file and a file for
// another key fail the sync naming the file and change nothing; and no
// plaintext is in the controller's log, its events, any API answer, any
// file under its data directory, or the revisions it keeps in the swarm.
func TestSopsSecretsDeployDecryptedAndLeakNowhere(t *testing.T) {
	if skepBinary == "" {
		t.Skip("no skep binary in -short mode")
	}
	cli := harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	e := &cliEnv{ns: harness.Name(t, "sops"), v1: harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"})}
	harness.CleanupStack(t, cli, e.ns)
	e.repo = git.CreateRepo(t, "app")

	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	recipient := id.Recipient().String()
	port := harness.FreePort(t)
	compose := fmt.Sprintf(`services:
  web:
    image: ${IMAGE}
    env_file: app.enc.env
    environment:
      DSN: postgres://app:${DB_PASSWORD}@db/app
      REV: ${REV}
    deploy: {endpoint_mode: dnsrr, replicas: 1}
    ports: [{target: 8080, published: %d, mode: host}]
    secrets: [db, tls]
secrets:
  db:
    file: ./db.enc.yaml
  tls:
    file: ./tls.key.enc
`, port)
	first := sopsRelease{plaintext(t, "dbpw"), plaintext(t, "token"), plaintext(t, "dbsecret"), plaintext(t, "tlskey"), "1"}
	files := first.files(t, recipient)
	files["compose.yaml"] = compose
	e.repo.Commit(t, "main", files)

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "age.key")
	if err := os.WriteFile(keyFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apps := filepath.Join(dir, "apps.yaml")
	if err := os.WriteFile(apps, []byte(fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: web
    release: %s
    source: {repo: %s, revision: main, variables: {IMAGE: %s}}
    syncPolicy: {automated: false, interval: 1h, resolveImage: never}
`, e.ns, e.repo.URL, e.v1)), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{out: t.Output()}
	launchLogging(t, e, dir, apps, logs, "--age-identity", keyFile)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	t.Run("a sync deploys the decrypted secrets, env file and variables", func(t *testing.T) {
		e.ok(t, "app", "sync", "web", "--wait")
		checkDeployed(t, e, base, first)
	})
	t.Run("the revision records what was deployed and the next plan is unchanged", func(t *testing.T) {
		checkRecorded(t, e)
	})

	second := sopsRelease{plaintext(t, "dbpw2"), plaintext(t, "token2"), plaintext(t, "dbsecret2"), first.tlsKey, "2"}
	t.Run("a rotation shows in the diff as changed, without values", func(t *testing.T) {
		files := second.files(t, recipient)
		delete(files, "tls.key.enc") // unchanged
		e.repo.Commit(t, "main", files)
		e.ok(t, "app", "refresh", "web")
		var diff string
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			diff = e.ok(t, "app", "diff", "web", "-o", "json")
			return strings.Contains(diff, "upgrade"), diff
		})
		for _, want := range []string{`Env[\"API_TOKEN\"]","old":"\"(sops:`, `Env[\"REV\"]","old":"\"(sops:`, `"postgres://app:(sops:`, `"kind":"secret"`} {
			if !strings.Contains(diff, want) {
				t.Errorf("diff lacks %q:\n%s", want, diff)
			}
		}
		// Only what the values made changed: not the image or the
		// labels, which hold the same digits in plain.
		for _, unwanted := range []string{"Image", "Labels"} {
			if strings.Contains(diff, unwanted) {
				t.Errorf("diff shows a change of %s that did not happen:\n%s", unwanted, diff)
			}
		}
		e.ok(t, "app", "sync", "web", "--wait")
		checkDeployed(t, e, base, second)
		checkRecorded(t, e)
	})
	// What the API and the CLI say while the release is healthy; they are
	// asked again once syncs have failed.
	answers := readAnswers(t, e, false)

	before := swarmState(t, e)
	for _, tt := range []struct {
		name, file, want string
		files            func() map[string]string
	}{
		{"a tampered file fails the sync naming it and changes nothing", "db.enc.yaml", "MAC mismatch", func() map[string]string {
			f := second.files(t, recipient)
			return map[string]string{"db.enc.yaml": "added_unencrypted: x\n" + f["db.enc.yaml"]}
		}},
		{"a file for another key fails the sync naming it and changes nothing", "app.enc.env", "is a recipient", func() map[string]string {
			f := sopsRelease{apiToken: plaintext(t, "token3")}.files(t, other.Recipient().String())
			return map[string]string{"app.enc.env": f["app.enc.env"]}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			commit := e.repo.Commit(t, "main", tt.files())
			out, errOut, code := e.run(t, e.env, "app", "sync", "web", "--wait")
			if code == 0 {
				t.Fatalf("sync of %s succeeded:\n%s", commit[:7], out)
			}
			if msg := out + errOut; !strings.Contains(msg, tt.file) {
				t.Errorf("sync failure does not name %s:\n%s", tt.file, msg)
			}
			detail := e.ok(t, "app", "get", "web", "-o", "json")
			if !strings.Contains(detail, tt.file) || !strings.Contains(detail, tt.want) {
				t.Errorf("status lacks %s / %q:\n%s", tt.file, tt.want, detail)
			}
			if after := swarmState(t, e); after != before {
				t.Errorf("the failed sync changed the swarm:\nbefore %s\nafter  %s", before, after)
			}
			checkDeployed(t, e, base, second)
		})
	}

	t.Run("no plaintext in logs, events, API answers, the data directory or revisions", func(t *testing.T) {
		secrets := append(first.values(), second.values()...)
		where := map[string]string{"controller log": logs.String()}
		for what, text := range answers {
			where[what+" (healthy)"] = text
		}
		for what, text := range readAnswers(t, e, true) {
			where[what+" (after failed syncs)"] = text
		}
		if events := where["GET /api/v1/events?app=web (after failed syncs)"]; !strings.Contains(events, "sync-succeeded") || !strings.Contains(events, "MAC mismatch") {
			t.Errorf("the events answer holds no sync-succeeded or MAC mismatch; is it the right route?\n%s", events)
		}
		files := 0
		err := filepath.WalkDir(filepath.Join(dir, "data"), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			files++
			where[path] = string(data)
			return err
		})
		if err != nil || files < 3 {
			t.Fatalf("walk the data directory: %d files, %v", files, err)
		}
		// The search itself works: the service's environment holds the
		// value in plain, as any environment variable in Swarm does.
		if !strings.Contains(swarmState(t, e), second.apiToken) {
			t.Fatalf("the search does not find %q where it must be: in the service's environment", second.apiToken)
		}
		for name, data := range revisionConfigs(t, e) {
			where["swarm config "+name] = data
		}
		for what, text := range where {
			for _, s := range secrets {
				for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
					if strings.Contains(text, form) {
						t.Errorf("%s holds the plaintext %q", what, s)
					}
				}
			}
		}
	})
}

// readAnswers asks every read route of the API and the CLI's reads as
// JSON. After failed syncs the diff, which renders the failing commit,
// answers with an error; failing says so.
func readAnswers(t *testing.T, e *cliEnv, failing bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range []string{"/api/v1/status", "/api/v1/applications", "/api/v1/applications/web",
		"/api/v1/applications/web/diff", "/api/v1/applications/web/history", "/api/v1/events?app=web", "/api/v1/events", "/metrics"} {
		out["GET "+path] = apiGet(t, e, path, failing && strings.HasSuffix(path, "/diff"))
	}
	for _, args := range [][]string{{"status", "-o", "json"}, {"app", "list", "-o", "json"}, {"app", "get", "web", "-o", "json"}, {"app", "diff", "web", "-o", "json"}, {"app", "history", "web", "-o", "json"}, {"events", "--app", "web", "-o", "json"}} {
		stdout, stderr, code := e.run(t, e.env, args...)
		if code != 0 && !(failing && args[1] == "diff") {
			t.Errorf("skep %s exited %d: %s", strings.Join(args, " "), code, stderr)
		}
		out["skep "+strings.Join(args, " ")] = stdout + stderr
	}
	return out
}

// checkDeployed checks what the task sees in its secrets and what its
// service holds in its environment.
func checkDeployed(t *testing.T, e *cliEnv, base string, r sopsRelease) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		got := httpBody(ctx, base+"/secrets/db")
		return got == "user: app\npassword: "+r.dbSecret+"\n", fmt.Sprintf("/run/secrets/db reads %q", got)
	})
	if got, want := httpBody(t.Context(), base+"/secrets/tls"), "-----BEGIN PRIVATE KEY-----\n"+r.tlsKey+"\n-----END PRIVATE KEY-----\n"; got != want {
		t.Errorf("/run/secrets/tls reads %q, want %q", got, want)
	}
	svc, err := harness.ServiceNamed(t.Context(), harness.RequireSwarm(t), e.ns+"_web")
	if err != nil || svc == nil {
		t.Fatalf("service %s_web: %v", e.ns, err)
	}
	env := strings.Join(svc.Spec.TaskTemplate.ContainerSpec.Env, "\n")
	for _, want := range []string{"API_TOKEN=" + r.apiToken, "DSN=postgres://app:" + r.dbPassword + "@db/app", "REV=" + r.rev} {
		if !strings.Contains(env, want) {
			t.Errorf("service env lacks %q:\n%s", want, env)
		}
	}
}

// checkRecorded checks the newest revision: it holds the service's image
// and labels as deployed, REV as its mask, and the plan against it, with
// git unchanged, is unchanged.
func checkRecorded(t *testing.T, e *cliEnv) {
	t.Helper()
	svc, err := harness.ServiceNamed(t.Context(), harness.RequireSwarm(t), e.ns+"_web")
	if err != nil || svc == nil {
		t.Fatalf("service %s_web: %v", e.ns, err)
	}
	newest := 0
	var rev struct {
		Release struct {
			Services map[string]swarm.ServiceSpec `json:"services"`
		} `json:"release"`
	}
	for name, data := range revisionConfigs(t, e) {
		n, err := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
		if err != nil || n < newest {
			continue
		}
		newest = n
		if err := json.Unmarshal([]byte(data), &rev); err != nil {
			t.Fatalf("revision %s: %v", name, err)
		}
	}
	got, ok := rev.Release.Services[e.ns+"_web"]
	if !ok {
		t.Fatalf("revision %d holds no service %s_web", newest, e.ns)
	}
	live, recorded := svc.Spec.TaskTemplate.ContainerSpec, got.TaskTemplate.ContainerSpec
	if image, _, _ := strings.Cut(live.Image, "@"); recorded.Image != image && recorded.Image != live.Image {
		t.Errorf("revision %d records image %q, the service runs %q", newest, recorded.Image, live.Image)
	}
	for k, v := range got.Labels {
		if svc.Spec.Labels[k] != v {
			t.Errorf("revision %d records label %s=%q, the service has %q", newest, k, v, svc.Spec.Labels[k])
		}
	}
	if !slices.ContainsFunc(recorded.Env, func(s string) bool { return strings.HasPrefix(s, "REV=(sops:") }) {
		t.Errorf("revision %d records no masked REV: %q", newest, recorded.Env)
	}
	diff := e.ok(t, "app", "diff", "web", "-o", "json")
	if !strings.Contains(diff, `"action":"unchanged"`) {
		t.Errorf("the plan after the sync is not unchanged:\n%s", diff)
	}
}

// httpBody is the body of a 200 answer to url, or the error.
func httpBody(ctx context.Context, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d: %s %v", resp.StatusCode, b, err)
	}
	return string(b)
}

// apiGet is the admin's answer to a GET of path on the controller; it must
// be 200 unless anyStatus.
func apiGet(t *testing.T, e *cliEnv, path string, anyStatus bool) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.server+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer cli-e2e-admin-token")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK && !anyStatus {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return string(b)
}

// swarmState is what a write would change: the release's service spec
// and the names of its secrets and configs (revisions included). The
// service's version index is no measure: Swarm moves it itself as an
// update's status settles.
func swarmState(t *testing.T, e *cliEnv) string {
	t.Helper()
	cli := harness.RequireSwarm(t)
	svc, err := harness.ServiceNamed(t.Context(), cli, e.ns+"_web")
	if err != nil || svc == nil {
		t.Fatalf("service %s_web: %v", e.ns, err)
	}
	spec, err := json.Marshal(svc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	secrets, err := cli.SecretList(t.Context(), swarm.SecretListOptions{Filters: filters.NewArgs(filters.Arg("name", e.ns))})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		names = append(names, s.Spec.Name)
	}
	configs, err := cli.ConfigList(t.Context(), swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", "skep-rev-"+e.ns))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configs {
		names = append(names, c.Spec.Name)
	}
	slices.Sort(names)
	return fmt.Sprintf("%s %v", spec, names)
}

// revisionConfigs returns the data of the configs the controller keeps
// for the release (its revisions), by name, gunzipped where gzipped.
func revisionConfigs(t *testing.T, e *cliEnv) map[string]string {
	t.Helper()
	cli := harness.RequireSwarm(t)
	list, err := cli.ConfigList(t.Context(), swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", "skep-rev-"+e.ns))})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatalf("no revision configs skep-rev-%s*", e.ns)
	}
	out := map[string]string{}
	for _, c := range list {
		out[c.Spec.Name] = gunzipped(c.Spec.Data)
	}
	return out
}

// gunzipped is data inflated when it is gzip, else data itself.
func gunzipped(data []byte) string {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return string(data)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return string(data)
	}
	return string(out)
}
