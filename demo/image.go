package demo

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// ImageRepo is the local repository of the demo application's images.
// Images are tagged ImageRepo:<version>-<content digest>; they stay
// local, since the swarm is this machine and resolveImage is off.
const ImageRepo = "skep-demo-app"

// ImageBuilder is the part of the Engine API the demo builds images with.
// The moby client satisfies it; Engine embeds it.
type ImageBuilder interface {
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
}

// BuildImage builds, through the Engine API, a FROM-scratch image holding
// binary (a static skep) that runs `skep demo-app` reporting version. It
// reuses an image with the same content. It returns the image reference.
// It blocks until the build ends and is safe to call again: the tag
// depends only on the content.
func BuildImage(ctx context.Context, eng ImageBuilder, binary, version string) (string, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", binary, err)
	}
	// Checked before the build so the error says what to do, instead of a
	// container that exits with "no such file or directory".
	if err := requireStatic(binary); err != nil {
		return "", err
	}
	dockerfile := fmt.Sprintf(`FROM scratch
COPY skep /skep
ENV DEMO_VERSION=%s DEMO_ADDR=:%d
EXPOSE %d
HEALTHCHECK --interval=2s --timeout=2s --start-period=2s --retries=3 CMD ["/skep", "demo-app", "health"]
ENTRYPOINT ["/skep", "demo-app"]
`, version, AppPort, AppPort)
	sum := sha256.New()
	sum.Write(data)
	sum.Write([]byte(dockerfile))
	// The tag carries a digest of binary and Dockerfile: a rebuilt skep gets
	// a new tag, so the swarm never runs a stale image under an old name.
	ref := fmt.Sprintf("%s:%s-%s", ImageRepo, version, hex.EncodeToString(sum.Sum(nil))[:12])
	found, err := eng.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", ref))})
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", ref, err)
	}
	// Same content, same tag: skip the build, which sends the whole binary.
	if len(found) > 0 {
		return ref, nil
	}
	var buf bytes.Buffer
	// The build context is made in memory: two files, no directory to
	// create or clean up.
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{"Dockerfile", []byte(dockerfile)}, {"skep", data}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.data))}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	resp, err := eng.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		// BuilderV1 speaks the plain JSON progress stream read below and needs
		// no BuildKit session; ForceRemove keeps failed builds from leaving
		// intermediate containers.
		Tags: []string{ref}, Remove: true, ForceRemove: true, Version: build.BuilderV1,
		// The label is how removeImages finds these images and only these.
		Labels: map[string]string{LabelDemo: "true"},
	})
	if err != nil {
		return "", fmt.Errorf("build %s: %w", ref, err)
	}
	defer resp.Body.Close()
	// ImageBuild returns once the build started; the build's outcome is in
	// the stream, and a failed step is an "error" message, not an HTTP error.
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return ref, nil
		} else if err != nil {
			return "", fmt.Errorf("build %s: read progress: %w", ref, err)
		}
		if msg.Error != "" {
			return "", fmt.Errorf("build %s: %s", ref, msg.Error)
		}
	}
}

// requireStatic refuses a dynamically linked binary: a FROM-scratch image
// has no loader or libc to run it.
func requireStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("inspect %s: %w (the demo needs a Linux skep binary)", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0 (make build does)", path)
		}
	}
	return nil
}
