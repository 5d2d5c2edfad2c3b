package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// TestImageRepo is the local repository name of images built by TestImage.
// The images stay local (push them with Registry.Push). Tags carry a
// content digest, so an unchanged testapp is built once and reused
// across test runs.
const TestImageRepo = "skep-testapp"

// TestAppPort is the port the test application listens on in its container.
// PublishHostPort targets it; testapp's default address matches.
const TestAppPort = 8080

// testAppBinary caches the compiled test application for the process: a
// go build takes seconds, and every test image holds the same binary.
var testAppBinary struct {
	once sync.Once
	data []byte
	err  error
}

// buildTestApp compiles harness/testapp once per test process, static.
func buildTestApp() ([]byte, error) {
	testAppBinary.once.Do(func() {
		// The source is found next to this file, so the build works whatever
		// directory `go test` runs the calling package in.
		_, here, _, ok := runtime.Caller(0)
		if !ok {
			testAppBinary.err = fmt.Errorf("locate harness source")
			return
		}
		dir, err := os.MkdirTemp("", "skep-testapp-")
		if err != nil {
			testAppBinary.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "testapp")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
		cmd.Dir = filepath.Join(filepath.Dir(here), "testapp")
		// Static and for Linux: a FROM-scratch image has no libc, and the
		// engine runs Linux containers even when tests run elsewhere.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if msg, err := cmd.CombinedOutput(); err != nil {
			testAppBinary.err = fmt.Errorf("go build testapp: %w: %s", err, msg)
			return
		}
		testAppBinary.data, testAppBinary.err = os.ReadFile(out)
	})
	return testAppBinary.data, testAppBinary.err
}

// ImageOptions shapes a test image. The zero value is a healthy image
// reporting version "v1".
type ImageOptions struct {
	Version   string // what GET / reports; default "v1"
	Unhealthy bool   // /healthz fails, so the HEALTHCHECK fails
}

// TestImage builds (or finds, when one with the same content exists) a
// FROM-scratch image of the test application through the Engine API and
// returns its local reference "skep-testapp:<version>-<content hash>".
func TestImage(t testing.TB, cli *client.Client, opts ImageOptions) string {
	t.Helper()
	ref, err := ensureTestImage(t.Context(), cli, opts)
	if err != nil {
		t.Fatalf("test image: %v", err)
	}
	return ref
}

// ensureTestImage does TestImage's work and returns its error, which
// TestImage turns into a test failure.
func ensureTestImage(ctx context.Context, cli *client.Client, opts ImageOptions) (string, error) {
	if opts.Version == "" {
		opts.Version = "v1"
	}
	bin, err := buildTestApp()
	if err != nil {
		return "", err
	}
	return ensureImage(ctx, cli, TestImageRepo, opts.Version, map[string][]byte{"Dockerfile": []byte(testDockerfile(opts)), "testapp": bin})
}

// BuildImage builds, through the Engine API, an image from a build context
// of files (which must hold a Dockerfile) and returns its local reference
// "<repo>:<version>-<content hash>". An image with the same content is
// found and reused, not built again.
func BuildImage(t testing.TB, cli *client.Client, repo, version string, files map[string][]byte) string {
	t.Helper()
	ref, err := ensureImage(t.Context(), cli, repo, version, files)
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	return ref
}

// ensureImage does BuildImage's work and returns its error.
func ensureImage(ctx context.Context, cli *client.Client, repo, version string, files map[string][]byte) (string, error) {
	sum := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(sum, "%s %d\n", name, len(files[name]))
		sum.Write(files[name])
	}
	ref := fmt.Sprintf("%s:%s-%s", repo, version, hex.EncodeToString(sum.Sum(nil))[:12])
	// Any inspect error just means build it: a real daemon failure shows
	// again, with a better message, in ImageBuild.
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	if err := buildImage(ctx, cli, ref, files); err != nil {
		return "", err
	}
	return ref, nil
}

// buildImage builds ref from files with the classic builder.
func buildImage(ctx context.Context, cli *client.Client, ref string, files map[string][]byte) error {
	buildCtx, err := tarContext(files)
	if err != nil {
		return err
	}
	resp, err := cli.ImageBuild(ctx, buildCtx, build.ImageBuildOptions{
		Tags:        []string{ref},
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", ref, err)
	}
	defer resp.Body.Close()
	if err := readJSONStream(resp.Body); err != nil {
		return fmt.Errorf("build %s: %w", ref, err)
	}
	return nil
}

// testDockerfile is the image's recipe. The HEALTHCHECK is fast (2s) so
// tests of health see a state change within seconds.
func testDockerfile(opts ImageOptions) string {
	unhealthy := "0"
	if opts.Unhealthy {
		unhealthy = "1"
	}
	return fmt.Sprintf(`FROM scratch
COPY testapp /testapp
ENV TESTAPP_VERSION=%s TESTAPP_UNHEALTHY=%s
EXPOSE %d
HEALTHCHECK --interval=2s --timeout=2s --start-period=2s --retries=2 CMD ["/testapp", "health"]
ENTRYPOINT ["/testapp"]
`, opts.Version, unhealthy, TestAppPort)
}

// tarContext packs the build context in memory, in a fixed order so the
// same files make the same bytes.
func tarContext(files map[string][]byte) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

// readJSONStream drains a build or push progress stream and returns the
// first error it reports; the Engine answers 200 and puts failures inline.
func readJSONStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read progress: %w", err)
		}
		if msg.Error != "" {
			return fmt.Errorf("%s", msg.Error)
		}
	}
}
