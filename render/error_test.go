package render

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree creates files (slash paths → content) below dir; a content of
// the form "symlink:TARGET" makes a symbolic link instead.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := cutPrefix(content, "symlink:"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

func TestComposeRejectsBadInputNamingFileLineAndField(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "outside the root"})

	tests := []struct {
		name  string
		files map[string]string
		in    Input // Root is set by the test
		want  string
		is    error // when set, errors.Is must hold
	}{
		{
			name:  "invalid YAML names the line",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n   bad: [\n"},
			want:  "compose.yaml:4: did not find expected key",
		},
		{
			name:  "duplicate key names both lines",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    image: b\n"},
			want:  `compose.yaml:4: key "image" already defined at line 3`,
		},
		{
			name:  "unknown service key names the field and line",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    imagee: b\n"},
			want:  "compose.yaml:4: services.web.imagee: unknown key",
		},
		{
			name:  "unknown top-level key names the field and line",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\nservice: {}\n"},
			want:  "compose.yaml:4: service: unknown key",
		},
		{
			name:  "wrong type names the field and line",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    deploy:\n      replicas: many\n"},
			want:  "compose.yaml:5: services.web.deploy.replicas: must be a integer",
		},
		{
			name:  "required variable unset names the variable, field and line",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    environment:\n      - TOKEN=${TOKEN:?set TOKEN}\n"},
			want:  "compose.yaml:5: services.web.environment[0]: required variable TOKEN is missing a value: set TOKEN",
		},
		{
			name:  "required variable is found even after a resolved one",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: ${X:?need X}:${TAG}\n"},
			in:    Input{Variables: map[string]string{"TAG": "v1"}},
			want:  "compose.yaml:3: services.web.image: required variable X is missing a value: need X",
		},
		{
			name:  "process environment is not used for interpolation",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: ${PATH:?no PATH}\n"},
			want:  "compose.yaml:3: services.web.image: required variable PATH is missing a value: no PATH",
		},
		{
			name:  "bad interpolation syntax names the field",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    command: echo $5\n"},
			want:  `compose.yaml:4: services.web.command: invalid interpolation "$5"; write a literal $ as $$`,
		},
		{
			name:  "missing compose file is named",
			files: map[string]string{"compose.yaml": "services: {}\n"},
			in:    Input{Files: []string{"compose.yaml", "prod.yaml"}},
			want:  "prod.yaml: file does not exist",
			is:    fs.ErrNotExist,
		},
		{
			name:  "no default compose file",
			files: map[string]string{"README": "x"},
			want:  "no compose file found",
		},
		{
			name:  "missing config file names the compose file, field and path",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\nconfigs:\n  app:\n    file: ./app.conf\n"},
			want:  "compose.yaml:6: configs.app.file: app.conf: file does not exist",
			is:    fs.ErrNotExist,
		},
		{
			name:  "config file escaping with .. is refused",
			files: map[string]string{"app/compose.yaml": "services:\n  web:\n    image: a\nconfigs:\n  app:\n    file: ../../etc/passwd\n"},
			in:    Input{Path: "app"},
			want:  "app/compose.yaml:6: configs.app.file: absolute path /etc/passwd is outside the repository",
		},
		{
			name:  "absolute secret file is refused",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\nsecrets:\n  s:\n    file: " + filepath.Join(outside, "secret.txt") + "\n"},
			want:  "compose.yaml:6: secrets.s.file: absolute path " + filepath.Join(outside, "secret.txt") + " is outside the repository",
		},
		{
			name: "secret file through a symlink leaving the root is refused",
			files: map[string]string{
				"compose.yaml": "services:\n  web:\n    image: a\nsecrets:\n  s:\n    file: ./s.txt\n",
				"s.txt":        "symlink:" + filepath.Join(outside, "secret.txt"),
			},
			want: "compose.yaml:6: secrets.s.file: s.txt: path escapes from parent",
		},
		{
			name: "compose file through a symlink leaving the root is refused",
			files: map[string]string{
				"compose.yaml": "symlink:" + filepath.Join(outside, "secret.txt"),
			},
			want: "compose.yaml: path escapes from parent",
		},
		{
			name: "config file through a symlink leaving the root is refused",
			files: map[string]string{
				"compose.yaml": "services:\n  web:\n    image: a\nconfigs:\n  app:\n    file: ./app.conf\n",
				"app.conf":     "symlink:" + filepath.Join(outside, "secret.txt"),
			},
			want: "compose.yaml:6: configs.app.file: app.conf: path escapes from parent",
		},
		{
			name: "default .env through a symlink leaving the root is refused",
			files: map[string]string{
				"compose.yaml": "services:\n  web:\n    image: a\n",
				".env":         "symlink:" + filepath.Join(outside, "secret.txt"),
			},
			want: ".env: path escapes from parent",
		},
		{
			name: "named env file through a symlink leaving the root is refused",
			files: map[string]string{
				"compose.yaml": "services:\n  web:\n    image: a\n",
				"prod.env":     "symlink:" + filepath.Join(outside, "secret.txt"),
			},
			in:   Input{EnvFiles: []string{"prod.env"}},
			want: "prod.env: path escapes from parent",
		},
		{
			name: "service env_file through a symlink leaving the root is refused",
			files: map[string]string{
				"compose.yaml": "services:\n  web:\n    image: a\n    env_file: ./web.env\n",
				"web.env":      "symlink:" + filepath.Join(outside, "secret.txt"),
			},
			want: "compose.yaml:4: services.web.env_file: web.env: path escapes from parent",
		},
		{
			name: "an application directory that is a symlink leaving the root is refused",
			files: map[string]string{
				"app": "symlink:" + outside,
			},
			in:   Input{Path: "app"},
			want: "app/.env: path escapes from parent",
		},
		{
			name:  "compose path escaping the root is refused",
			files: map[string]string{"compose.yaml": "services: {}\n"},
			in:    Input{Path: "../x"},
			want:  `../x: path "../x" leaves the repository`,
		},
		{
			name:  "compose file escaping the root is refused",
			files: map[string]string{"compose.yaml": "services: {}\n"},
			in:    Input{Files: []string{"../compose.yaml"}},
			want:  `../compose.yaml: path "../compose.yaml" leaves the repository`,
		},
		{
			name:  "service env_file escaping the root is refused",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    env_file: /etc/passwd\n"},
			want:  `compose.yaml:4: services.web.env_file: absolute path "/etc/passwd" is outside the repository`,
		},
		{
			name:  "missing env file is named",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n"},
			in:    Input{EnvFiles: []string{"prod.env"}},
			want:  "prod.env: file does not exist",
		},
		{
			name:  "service without image is refused as stack deploy does",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    command: [serve]\n"},
			want:  "compose.yaml:2: services.web.image: no image specified",
		},
		{
			name:  "invalid image reference names the field",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: UPPER/Case\n"},
			want:  `compose.yaml:3: services.web.image: invalid image reference "UPPER/Case"`,
		},
		{
			name:  "relative bind mount is refused",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    volumes:\n      - ./data:/data\n"},
			want:  "compose.yaml:5: services.web.volumes[0]: relative host path data names the checkout",
		},
		{
			name:  "forbidden option names the service",
			files: map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    volumes_from: [db]\n"},
			want:  "compose.yaml:4: services.web.volumes_from: unsupported option",
		},
		{
			name:  "top level must be a mapping",
			files: map[string]string{"compose.yaml": "- a\n- b\n"},
			want:  "compose.yaml:1: top-level object must be a mapping",
		},
		{
			name: "error in an override file names that file",
			files: map[string]string{
				"compose.yaml": "services:\n  web:\n    image: a\n",
				"prod.yaml":    "services:\n  web:\n    deploy:\n      replicas: x\n",
			},
			in:   Input{Files: []string{"compose.yaml", "prod.yaml"}},
			want: "prod.yaml:4: services.web.deploy.replicas: must be a integer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			in := tt.in
			in.Root = root
			doc, err := Compose(context.Background(), in)
			if err == nil {
				t.Fatalf("Compose() = %+v, nil; want error %q", doc.Config, tt.want)
			}
			if got := err.Error(); !hasPrefixOrEqual(got, tt.want) {
				t.Errorf("Compose() error = %q, want prefix %q", got, tt.want)
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Errorf("Compose() error %T is not a *render.Error", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func hasPrefixOrEqual(s, prefix string) bool {
	return len(s) >= len(prefix) && s[:len(prefix)] == prefix
}

func TestComposeRefusesLabelsInSkepsNamespaceNamingFileAndLine(t *testing.T) {
	const svc = "services:\n  web:\n    image: a\n"
	tests := []struct {
		name  string
		files map[string]string
		in    Input
		want  []string
	}{
		{
			name: "a config forging a revision record, each label on its line",
			files: map[string]string{"rev.json": "{}", "compose.yaml": svc + "    configs: [rev]\nconfigs:\n  rev:\n    file: ./rev.json\n    labels:\n" +
				"      io.skep.kind: revision\n      io.skep.revision: \"99\"\n"},
			want: []string{
				"compose.yaml:9: configs.rev.labels.io.skep.kind: label io.skep.kind is reserved for skep; remove it",
				"compose.yaml:10: configs.rev.labels.io.skep.revision: label io.skep.revision is reserved for skep; remove it",
			},
		},
		{
			name:  "a list of labels names the item's line",
			files: map[string]string{"s.txt": "x", "compose.yaml": svc + "    secrets: [s]\nsecrets:\n  s:\n    file: ./s.txt\n    labels:\n      - team=a\n      - io.skep.kind=hold\n"},
			want:  []string{"compose.yaml:10: secrets.s.labels.io.skep.kind: label io.skep.kind is reserved for skep"},
		},
		{
			name: "service, deploy, network and volume labels",
			files: map[string]string{"compose.yaml": svc + "    labels: [io.skep.application=x]\n    deploy:\n      labels:\n        IO.SKEP.WAVE: \"3\"\n" +
				"networks:\n  n:\n    labels: {io.skep.controller: other}\nvolumes:\n  v:\n    labels:\n      io.skep.release: other\n"},
			want: []string{
				"compose.yaml:4: services.web.labels.io.skep.application: label io.skep.application is reserved for skep",
				"compose.yaml:7: services.web.deploy.labels.IO.SKEP.WAVE: label IO.SKEP.WAVE is reserved for skep",
				"compose.yaml:10: networks.n.labels.io.skep.controller: label io.skep.controller is reserved for skep",
				"compose.yaml:14: volumes.v.labels.io.skep.release: label io.skep.release is reserved for skep",
			},
		},
		{
			name:  "an override file setting one is named, not the base file",
			files: map[string]string{"compose.yaml": svc, "override.yaml": "services:\n  web:\n    deploy:\n      labels:\n        io.skep.spec-hash: forged\n"},
			in:    Input{Files: []string{"compose.yaml", "override.yaml"}},
			want:  []string{"override.yaml:5: services.web.deploy.labels.io.skep.spec-hash: label io.skep.spec-hash is reserved for skep"},
		},
		{
			name:  "a label set through interpolation names the labels' line",
			files: map[string]string{".env": "LABEL=io.skep.kind=revision\n", "compose.yaml": svc + "    labels:\n      - ${LABEL}\n"},
			want:  []string{"compose.yaml:4: services.web.labels.io.skep.kind: label io.skep.kind is reserved for skep"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			in := tt.in
			in.Root = root
			doc, err := Compose(context.Background(), in)
			if err == nil {
				t.Fatalf("Compose() = %+v, nil; want errors %q", doc.Config, tt.want)
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Errorf("Compose() error %T is not a *render.Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Compose() error = %q, want a line %q", err, w)
				}
			}
		})
	}
}
