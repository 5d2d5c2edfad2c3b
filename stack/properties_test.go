package stack

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"
)

func TestConvertDoesNotModifyItsInput(t *testing.T) {
	for _, name := range fixtureNames(t) {
		cfg, files := loadFixture(t, fixtureDir+"/"+name)
		before := deepCopy(*cfg)
		if _, err := Convert(cfg, Options{Owner: testOwner(name), Files: files}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(before, *cfg); diff != "" {
			t.Errorf("%s: Convert modified its input (-before +after):\n%s", name, diff)
		}
	}
}

func TestConvertIsDeterministic(t *testing.T) {
	for _, name := range fixtureNames(t) {
		cfg, files := loadFixture(t, fixtureDir+"/"+name)
		first, err := Convert(cfg, Options{Owner: testOwner(name), Files: files})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			again, _ := Convert(cfg, Options{Owner: testOwner(name), Files: files})
			if diff := cmp.Diff(first, again); diff != "" {
				t.Fatalf("%s: second Convert differs:\n%s", name, diff)
			}
		}
	}
}

func TestConvertNamesFileObjectsByContentAndKeepsTheTarget(t *testing.T) {
	const doc = `
services:
  web:
    image: busybox
    configs:
      - source: conf
        target: /etc/app.conf
    secrets: [token]
configs:
  conf:
    file: ./app.conf
secrets:
  token:
    file: ./token
`
	convertWith := func(conf, token string) Release {
		t.Helper()
		rel, err := Convert(loadYAML(t, doc), Options{Owner: testOwner("app"), Files: map[string][]byte{
			"/repo/app.conf": []byte(conf),
			"/repo/token":    []byte(token),
		}})
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	v1 := convertWith("a=1", "secret-1")
	v1again := convertWith("a=1", "secret-1")
	v2 := convertWith("a=2", "secret-1")

	ref := func(r Release) (*swarm.ConfigReference, *swarm.SecretReference) {
		c := r.Services["app_web"].TaskTemplate.ContainerSpec
		return c.Configs[0], c.Secrets[0]
	}
	c1, s1 := ref(v1)
	c1again, _ := ref(v1again)
	c2, s2 := ref(v2)
	if !strings.HasPrefix(c1.ConfigName, "app_conf-") || len(c1.ConfigName) != len("app_conf-")+10 {
		t.Errorf("config name = %q, want app_conf-<10 hex digits>", c1.ConfigName)
	}
	if c1.ConfigName != c1again.ConfigName {
		t.Errorf("same content named %q and %q, want one name", c1.ConfigName, c1again.ConfigName)
	}
	if c1.ConfigName == c2.ConfigName {
		t.Errorf("changed content kept the name %q, want a new one", c1.ConfigName)
	}
	if s1.SecretName != s2.SecretName {
		t.Errorf("unchanged secret renamed from %q to %q", s1.SecretName, s2.SecretName)
	}
	if c2.File.Name != "/etc/app.conf" || s1.File.Name != "token" {
		t.Errorf("targets = %q, %q; want /etc/app.conf, token", c2.File.Name, s1.File.Name)
	}
	if c1.ConfigID != "" || s1.SecretID != "" {
		t.Errorf("ids = %q, %q; want empty (apply resolves them)", c1.ConfigID, s1.SecretID)
	}
	if got := v2.Configs[c2.ConfigName].Data; string(got) != "a=2" {
		t.Errorf("config data = %q, want a=2", got)
	}
	if _, ok := v2.Configs[c1.ConfigName]; ok {
		t.Errorf("release keeps the old config %s", c1.ConfigName)
	}
}

func TestContentNameStaysWithinSwarmLimit(t *testing.T) {
	long := strings.Repeat("x", 100)
	got := contentName(long, []byte("data"))
	if len(got) != maxNameLength {
		t.Errorf("len(contentName(100 chars)) = %d, want %d", len(got), maxNameLength)
	}
	if short := contentName("app_c", []byte("data")); short != "app_c-3a6eb0790f" {
		t.Errorf("contentName(app_c, data) = %q, want app_c-3a6eb0790f", short)
	}
}

func TestConvertUsesExternalObjectsByNameWithoutCreatingThem(t *testing.T) {
	cfg := loadYAML(t, `
services:
  web:
    image: busybox
    secrets: [s]
    networks: [proxy]
secrets:
  s:
    external: true
    name: shared-token
networks:
  proxy:
    external: true
    name: traefik-public
`)
	rel, err := Convert(cfg, Options{Owner: testOwner("app"), Allow: Allow{Secrets: []string{"shared-token"}, Networks: []string{"traefik-public"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Secrets) != 0 || len(rel.Networks) != 0 {
		t.Errorf("release creates secrets %v and networks %v, want none", rel.Secrets, rel.Networks)
	}
	spec := rel.Services["app_web"].TaskTemplate
	if got := spec.ContainerSpec.Secrets[0].SecretName; got != "shared-token" {
		t.Errorf("secret reference = %q, want shared-token", got)
	}
	if got := spec.Networks[0].Target; got != "traefik-public" {
		t.Errorf("network target = %q, want traefik-public", got)
	}
}

// Labels in Skep's own namespace are refused outright
// (TestConvertRefusesSkepLabelsFromGit); the stack namespace label, which
// docker stack deploy shares, is overwritten.
func TestConvertStampsOwnerLabelsWhichWinOverCompose(t *testing.T) {
	cfg := loadYAML(t, `
services:
  web:
    image: busybox
    labels:
      io.example.container: container-level
    deploy:
      labels:
        com.docker.stack.namespace: someone-else
        io.example.keep: "yes"
networks:
  default:
    labels:
      com.docker.stack.namespace: other
`)
	owner := Owner{Controller: "ctl", Application: "shop", Release: "shop-prod"}
	rel, err := Convert(cfg, Options{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	svc := rel.Services["shop-prod_web"]
	want := map[string]string{
		LabelNamespace: "shop-prod", LabelController: "ctl", LabelApplication: "shop", LabelRelease: "shop-prod",
		"com.docker.stack.image": "busybox", "io.example.keep": "yes",
	}
	if diff := cmp.Diff(want, svc.Labels); diff != "" {
		t.Errorf("service labels (-want +got):\n%s", diff)
	}
	wantContainer := map[string]string{LabelNamespace: "shop-prod", "io.example.container": "container-level"}
	if diff := cmp.Diff(wantContainer, svc.TaskTemplate.ContainerSpec.Labels); diff != "" {
		t.Errorf("container labels carry owner labels (-want +got):\n%s", diff)
	}
	if !owner.Owns(rel.Networks["shop-prod_default"].Labels) {
		t.Errorf("network labels %v do not name the owner", rel.Networks["shop-prod_default"].Labels)
	}
}

func TestConvertReportsEveryProblem(t *testing.T) {
	cfg := loadYAML(t, `
services:
  a:
    image: busybox
    secrets: [missing]
  b:
    image: busybox
    configs: [c]
configs:
  c:
    file: ./c.conf
`)
	_, err := Convert(cfg, Options{Owner: testOwner("app")})
	if err == nil {
		t.Fatal("Convert() = nil error, want two problems")
	}
	for _, want := range []string{
		`services.a.secrets[0]: undefined secret "missing"`,
		`configs.c: no content for file "/repo/c.conf"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Convert() error = %q, want it to contain %q", err, want)
		}
	}
}

func TestConvertRejectsInvalidReleaseNames(t *testing.T) {
	cfg := loadYAML(t, "services:\n  web:\n    image: busybox\n")
	for _, name := range []string{"", "-x", "a b", "a/b"} {
		if _, err := Convert(cfg, Options{Owner: testOwner(name)}); err == nil {
			t.Errorf("Convert(release %q) = nil error, want invalid release name", name)
		}
	}
}
