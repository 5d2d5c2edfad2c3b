package apply

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/golden"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// The Engine client must satisfy what apply asks for.
var _ Engine = (*client.Client)(nil)

func TestRevisionNameFitsSwarmLimitAndStaysUnique(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, tc := range []struct {
		name    string
		release string
		n       int
		want    string
	}{
		{name: "short release keeps its full name", release: "web", n: 3, want: "skep-rev-web-3"},
		{name: "long release is cut and hashed", release: long, n: 12},
		{name: "long release with another tail differs", release: long + "b", n: 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := revisionName(tc.release, tc.n)
			if len(got) > maxConfigName {
				t.Errorf("revisionName(%q, %d) = %q, %d characters, want at most %d", tc.release, tc.n, got, len(got), maxConfigName)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("revisionName(%q, %d) = %q, want %q", tc.release, tc.n, got, tc.want)
			}
			if !strings.HasSuffix(got, fmt.Sprintf("-%d", tc.n)) {
				t.Errorf("revisionName(%q, %d) = %q, want the number at the end", tc.release, tc.n, got)
			}
		})
	}
	if revisionName(long, 1) == revisionName(long+"b", 1) {
		t.Errorf("two long release names share revision name %q", revisionName(long, 1))
	}
}

func sampleRevision() Revision {
	replicas := uint64(2)
	return Revision{
		Number:      4,
		Commit:      "0123456789abcdef0123456789abcdef01234567",
		AppliedAt:   time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Actor:       "alice",
		Application: "shop",
		Images:      map[string]string{"shop_web": "registry.example/web:v2@sha256:" + strings.Repeat("ab", 32)},
		Release: RedactSecrets(stack.Release{
			Name: "shop",
			Services: map[string]swarm.ServiceSpec{"shop_web": {
				Annotations: swarm.Annotations{Name: "shop_web", Labels: map[string]string{stack.LabelNamespace: "shop"}},
				TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{
					Image: "registry.example/web:v2",
					Env:   []string{"MODE=prod"},
				}},
				Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
			}},
			Networks: map[string]network.CreateOptions{"shop_default": {Driver: "overlay", Labels: map[string]string{stack.LabelNamespace: "shop"}}},
			Configs:  map[string]swarm.ConfigSpec{"shop_conf-1a2b": {Annotations: swarm.Annotations{Name: "shop_conf-1a2b"}, Data: []byte("listen 80\n")}},
			Secrets:  map[string]swarm.SecretSpec{"shop_token-3c4d": {Annotations: swarm.Annotations{Name: "shop_token-3c4d"}, Data: []byte("hunter2")}},
		}),
	}
}

func TestRevisionRoundTripsAndHidesSecretValues(t *testing.T) {
	rev := sampleRevision()
	data, err := encodeRevision(rev)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gunzip(data)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("hunter2")) || strings.Contains(string(raw), "aHVudGVyMg") {
		t.Errorf("stored revision holds the secret value: %s", raw)
	}
	got, err := decodeRevision(data)
	if err != nil {
		t.Fatalf("decodeRevision(encodeRevision(rev)) = %v", err)
	}
	if diff := cmp.Diff(rev, got); diff != "" {
		t.Errorf("revision round trip (-want +got):\n%s", diff)
	}
	if want := digest([]byte("hunter2")); !bytes.Equal(got.Release.Secrets["shop_token-3c4d"].Data, want) {
		t.Errorf("secret data = %q, want its digest %q", got.Release.Secrets["shop_token-3c4d"].Data, want)
	}
}

func TestDecodeRevisionRefusesWhatItDidNotWrite(t *testing.T) {
	zip := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		_ = w.Close()
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{name: "plain JSON without gzip", data: []byte(`{"schema":1,"number":1}`)},
		{name: "gzip of something else", data: zip("hello")},
		{name: "unknown schema", data: zip(`{"schema":2,"number":1}`)},
		{name: "number zero", data: zip(`{"schema":1,"number":0}`)},
		{name: "empty", data: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeRevision(tc.data); err == nil {
				t.Errorf("decodeRevision(%q) succeeded, want an error", tc.data)
			}
		})
	}
}

// TestRevisionFixtureDecodes pins the stored format: the fixture was written
// by encodeRevision(sampleRevision()); rewrite it with -update.
func TestRevisionFixtureDecodes(t *testing.T) {
	path := filepath.Join("testdata", "revision-v1.gz")
	if golden.Update() {
		data, err := encodeRevision(sampleRevision())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRevision(data)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if diff := cmp.Diff(sampleRevision(), got); diff != "" {
		t.Errorf("decode %s (-want +got):\n%s", path, diff)
	}
}

func FuzzDecodeRevision(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "revision-*.gz"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no revision seeds in testdata: %v", err)
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			f.Fatalf("seed %s is empty or unreadable: %v", p, err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rev, err := decodeRevision(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode and decode to the same revision.
		again, err := encodeRevision(rev)
		if err != nil {
			t.Fatalf("encode decoded revision: %v", err)
		}
		back, err := decodeRevision(again)
		if err != nil {
			t.Fatalf("decode re-encoded revision: %v", err)
		}
		if diff := cmp.Diff(rev, back, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func TestUnchangedToleratesDaemonDefaultsButNotEdits(t *testing.T) {
	one, two := uint64(1), uint64(2)
	second := time.Second
	desired := func() swarm.ServiceSpec {
		return swarm.ServiceSpec{
			Annotations: swarm.Annotations{Name: "s_web", Labels: map[string]string{"a": "b"}},
			TaskTemplate: swarm.TaskSpec{
				ContainerSpec: &swarm.ContainerSpec{Image: "web:v1", Env: []string{"A=1"}},
				Placement:     &swarm.Placement{},
				Resources:     &swarm.ResourceRequirements{},
				// restart_policy: {delay: 1s}, no condition.
				RestartPolicy: &swarm.RestartPolicy{Delay: &second},
			},
			UpdateConfig: &swarm.UpdateConfig{Parallelism: 1},
			EndpointSpec: &swarm.EndpointSpec{Ports: []swarm.PortConfig{{TargetPort: 80, PublishedPort: 8080}}},
		}
	}
	stored := func(edit func(*swarm.ServiceSpec)) swarm.ServiceSpec {
		s := desired()
		// What the Engine hands back for desired().
		s.Labels = map[string]string{"a": "b"}
		s.TaskTemplate.ContainerSpec.Isolation = "default"
		s.TaskTemplate.Runtime = swarm.RuntimeContainer
		s.TaskTemplate.ForceUpdate = 3
		s.TaskTemplate.Placement, s.TaskTemplate.Resources = nil, nil
		s.TaskTemplate.RestartPolicy = &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionAny, Delay: &second}
		s.Mode = swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}}
		s.UpdateConfig = &swarm.UpdateConfig{Parallelism: 1, FailureAction: "pause", Order: "stop-first"}
		s.EndpointSpec = &swarm.EndpointSpec{Mode: "vip", Ports: []swarm.PortConfig{{Protocol: "tcp", TargetPort: 80, PublishedPort: 8080, PublishMode: "ingress"}}}
		if edit != nil {
			edit(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		live swarm.ServiceSpec
		want bool
	}{
		{name: "engine defaults and a forced update are not changes", live: stored(nil), want: true},
		{name: "scaled out of band is a change", live: stored(func(s *swarm.ServiceSpec) { s.Mode.Replicated.Replicas = &two }), want: false},
		{name: "image edited out of band is a change", live: stored(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = "web:v0" }), want: false},
		{name: "env edited out of band is a change", live: stored(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Env = nil }), want: false},
		{name: "a restart condition edited out of band is a change", live: stored(func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy.Condition = swarm.RestartPolicyConditionOnFailure
		}), want: false},
		{name: "another spec hash is a change", live: stored(func(s *swarm.ServiceSpec) { s.Labels[stack.LabelSpecHash] = "other" }), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := desired()
			hash := specHash(d)
			d.Labels[stack.LabelSpecHash] = hash
			if _, ok := tc.live.Labels[stack.LabelSpecHash]; !ok {
				tc.live.Labels[stack.LabelSpecHash] = hash
			}
			if got := unchanged(tc.live, d); got != tc.want {
				l, _ := canonical(tc.live)
				r, _ := canonical(d)
				t.Errorf("unchanged = %v, want %v; canonical diff (-live +desired):\n%s", got, tc.want, cmp.Diff(l, r))
			}
		})
	}
}

func TestSpecHashIsStableAndSeesEveryField(t *testing.T) {
	base := func() swarm.ServiceSpec {
		yes := false
		return swarm.ServiceSpec{
			Annotations:  swarm.Annotations{Name: "s_web", Labels: map[string]string{"b": "2", "a": "1"}},
			TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "web:v1", Init: &yes}},
		}
	}
	h := specHash(base())
	if h != specHash(base()) {
		t.Fatal("specHash differs for equal specs")
	}
	for _, tc := range []struct {
		name string
		edit func(*swarm.ServiceSpec)
		same bool
	}{
		{name: "the hash label itself does not count", edit: func(s *swarm.ServiceSpec) { s.Labels[stack.LabelSpecHash] = "x" }, same: true},
		{name: "force update counter does not count", edit: func(s *swarm.ServiceSpec) { s.TaskTemplate.ForceUpdate = 9 }, same: true},
		{name: "an explicit init false differs from unset", edit: func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Init = nil }},
		{name: "a label value counts", edit: func(s *swarm.ServiceSpec) { s.Labels["a"] = "3" }},
		{name: "the image counts", edit: func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = "web:v2" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(&s)
			if got := specHash(s) == h; got != tc.same {
				t.Errorf("specHash after edit equal = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestImageReferenceForms(t *testing.T) {
	for _, tc := range []struct {
		in, normalized, noDigest string
		digested                 bool
	}{
		{in: "nginx", normalized: "nginx:latest", noDigest: "nginx:latest"},
		{in: "docker.io/library/nginx:1.25", normalized: "nginx:1.25", noDigest: "nginx:1.25"},
		{in: "127.0.0.1:5000/a/b:v1@sha256:" + strings.Repeat("0", 64), normalized: "127.0.0.1:5000/a/b:v1@sha256:" + strings.Repeat("0", 64), noDigest: "127.0.0.1:5000/a/b:v1", digested: true},
		{in: "Not A Reference", normalized: "Not A Reference", noDigest: "Not A Reference"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := normalizeImage(tc.in); got != tc.normalized {
				t.Errorf("normalizeImage(%q) = %q, want %q", tc.in, got, tc.normalized)
			}
			if got := withoutDigest(tc.in); got != tc.noDigest {
				t.Errorf("withoutDigest(%q) = %q, want %q", tc.in, got, tc.noDigest)
			}
			if got := hasDigest(tc.in); got != tc.digested {
				t.Errorf("hasDigest(%q) = %v, want %v", tc.in, got, tc.digested)
			}
		})
	}
}

func TestResolveImageValidate(t *testing.T) {
	for _, tc := range []struct {
		in      ResolveImage
		wantErr bool
	}{
		{in: ""}, {in: ResolveAlways}, {in: ResolveChanged}, {in: ResolveNever},
		{in: "sometimes", wantErr: true}, {in: "Always", wantErr: true},
	} {
		if err := tc.in.Validate(); (err != nil) != tc.wantErr {
			t.Errorf("ResolveImage(%q).Validate() = %v, want error %v", tc.in, err, tc.wantErr)
		}
	}
}

func TestEngineErrorClassifiesByCause(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		err                  error
		transient, isStalled bool
	}{
		{name: "invalid spec is stalled", err: fmt.Errorf("bad mount: %w", cerrdefs.ErrInvalidArgument), isStalled: true},
		{name: "daemon failure is transient", err: errors.New("connection refused"), transient: true},
		{name: "object gone meanwhile is transient", err: fmt.Errorf("gone: %w", cerrdefs.ErrNotFound), transient: true},
		{name: "name taken concurrently is transient", err: fmt.Errorf("taken: %w", cerrdefs.ErrConflict), transient: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fmt.Errorf("apply: %w", engineError("create service \"x\"", tc.err))
			if (outcome.Of(err) == outcome.Transient) != tc.transient || (outcome.Of(err) == outcome.Stalled) != tc.isStalled {
				t.Errorf("engineError(%v): transient %v stalled %v, want %v %v", tc.err, (outcome.Of(err) == outcome.Transient), (outcome.Of(err) == outcome.Stalled), tc.transient, tc.isStalled)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("engineError(%v) does not wrap its cause", tc.err)
			}
		})
	}
}

func TestValidateRefusesBadOptions(t *testing.T) {
	owner := stack.Owner{Controller: "c", Application: "a", Release: "r"}
	ok := stack.Release{Name: "r", Services: map[string]swarm.ServiceSpec{"r_web": {TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "x"}}}}}
	for _, tc := range []struct {
		name    string
		rel     stack.Release
		opts    Options
		wantErr bool
	}{
		{name: "valid release and owner", rel: ok, opts: Options{Owner: owner}},
		{name: "owner without controller", rel: ok, opts: Options{Owner: stack.Owner{Release: "r"}}, wantErr: true},
		{name: "owner of another release", rel: ok, opts: Options{Owner: stack.Owner{Controller: "c", Release: "s"}}, wantErr: true},
		{name: "unknown resolve policy", rel: ok, opts: Options{Owner: owner, ResolveImage: "often"}, wantErr: true},
		{name: "service key and name disagree", rel: stack.Release{Name: "r", Services: map[string]swarm.ServiceSpec{
			"r_web": {Annotations: swarm.Annotations{Name: "r_api"}, TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "x"}}}}},
			opts: Options{Owner: owner}, wantErr: true},
		{name: "service without container", rel: stack.Release{Name: "r", Services: map[string]swarm.ServiceSpec{"r_web": {}}}, opts: Options{Owner: owner}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(tc.rel, tc.opts.withDefaults())
			if (err != nil) != tc.wantErr {
				t.Fatalf("validate = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && outcome.Of(err) != outcome.Stalled {
				t.Errorf("validate error %v is not stalled", err)
			}
		})
	}
}

// A value decrypted from a SOPS env file is recorded as its mask, never in
// plain, and the list of such values is not recorded at all.
func TestRevisionMasksValuesDecryptedFromSops(t *testing.T) {
	rev := sampleRevision()
	rel := stack.Release{
		Name: "shop",
		Services: map[string]swarm.ServiceSpec{"shop_web": {
			Annotations: swarm.Annotations{Name: "shop_web"},
			TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{
				Image: "registry.example/web:v2",
				Env:   []string{"DB_PASSWORD=pw-from-sops", "DSN=pg://app:pw-from-sops@db"},
			}},
		}},
		Sensitive: []string{"pw-from-sops"},
	}
	rev.Release = RedactSecrets(rel)
	data, err := encodeRevision(rev)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gunzip(data)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("pw-from-sops")) || !bytes.Contains(raw, []byte("DB_PASSWORD=(sops:")) {
		t.Errorf("stored revision holds the decrypted value, or no mask: %s", raw)
	}
	if rev.Release.Sensitive != nil {
		t.Errorf("RedactSecrets kept Sensitive: %q", rev.Release.Sensitive)
	}
	if env := rel.Services["shop_web"].TaskTemplate.ContainerSpec.Env; env[0] != "DB_PASSWORD=pw-from-sops" {
		t.Errorf("RedactSecrets changed the release it was given: %q", env)
	}
}

// configList is a ConfigLister answering with a fixed list, whatever the
// filters: revisionConfigs must prove each config itself.
type configList []swarm.Config

func (l configList) ConfigList(context.Context, swarm.ConfigListOptions) ([]swarm.Config, error) {
	return slices.Clone(l), nil
}

func TestRevisionsSkipAndReportARecordThatDoesNotDecode(t *testing.T) {
	owner := stack.Owner{Controller: "ctl", Application: "shop", Release: "shop"}
	labels := func(n string) map[string]string {
		l := owner.Labels()
		l[stack.LabelKind], l[stack.LabelRevision] = stack.KindRevision, n
		return l
	}
	good := sampleRevision()
	good.Number, good.ConfigID = 1, "id-1"
	data, err := encodeRevision(good)
	if err != nil {
		t.Fatal(err)
	}
	list := configList{
		{ID: "id-1", Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "skep-rev-shop-1", Labels: labels("1")}, Data: data}},
		// What a commit made before git's labels were refused: a config of
		// the release labelled as its revision 99, holding no revision.
		{ID: "id-99", Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "shop_rev-1a2b3c4d5e", Labels: labels("99")}, Data: []byte("{}")}},
		// A revision's data under another revision's number.
		{ID: "id-7", Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "skep-rev-shop-7", Labels: labels("7")}, Data: data}},
	}
	latest, err := ReadLatest(t.Context(), list, owner)
	if err != nil {
		t.Fatalf("ReadLatest() = %v, want the bad records skipped", err)
	}
	if latest.Revision == nil || latest.Revision.Number != 1 {
		t.Fatalf("ReadLatest().Revision = %+v, want revision 1", latest.Revision)
	}
	wantSkipped := []string{`revision config "shop_rev-1a2b3c4d5e": decode revision: unexpected EOF; skipped`, `revision config "skep-rev-shop-7": labelled revision 7 but holds 1`}
	if len(latest.Skipped) != len(wantSkipped) {
		t.Fatalf("ReadLatest().Skipped = %q, want %d records", latest.Skipped, len(wantSkipped))
	}
	for i, w := range wantSkipped {
		if !strings.Contains(latest.Skipped[i], w) {
			t.Errorf("Skipped[%d] = %q, want it to say %q", i, latest.Skipped[i], w)
		}
	}
	rev, err := LatestRevision(t.Context(), list, owner)
	if err != nil || rev == nil || rev.Number != 1 {
		t.Errorf("LatestRevision() = %+v, %v; want revision 1", rev, err)
	}
	revs, err := Revisions(t.Context(), list, owner)
	if err != nil || len(revs) != 1 || revs[0].Number != 1 {
		t.Errorf("Revisions() = %+v, %v; want revision 1 alone", revs, err)
	}
}
