package render

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestComposeInterpolatesFromEnvFilesThenVariables(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"app/compose.yaml": "services:\n  web:\n    image: ${IMAGE}:${TAG:-latest}\n    environment:\n      A: ${A}\n      B: ${B}\n      C: ${C-unset}\n",
		"app/.env":         "A=from-dotenv\nB=from-dotenv\nIMAGE=ignored\n",
		"app/base.env":     "A=from-base\nB=from-base\nIMAGE=repo/web\n",
		"app/prod.env":     "B=from-prod\n",
	})
	tests := []struct {
		name string
		in   Input
		want map[string]string // image and environment
	}{
		{
			name: "default .env is read when no env files are named",
			in:   Input{Path: "app", Variables: map[string]string{"IMAGE": "img"}},
			want: map[string]string{"image": "img:latest", "A": "from-dotenv", "B": "from-dotenv", "C": "unset"},
		},
		{
			name: "named env files replace .env and later ones win",
			in:   Input{Path: "app", EnvFiles: []string{"base.env", "prod.env"}},
			want: map[string]string{"image": "repo/web:latest", "A": "from-base", "B": "from-prod", "C": "unset"},
		},
		{
			name: "variables win over env files",
			in:   Input{Path: "app", EnvFiles: []string{"base.env"}, Variables: map[string]string{"B": "inline", "TAG": "v2", "C": ""}},
			want: map[string]string{"image": "repo/web:v2", "A": "from-base", "B": "inline", "C": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Root = root
			doc, err := Compose(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			svc := doc.Config.Services[0]
			got := map[string]string{"image": svc.Image}
			for k, v := range svc.Environment {
				got[k] = *v
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Compose() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComposeFollowsSymlinksThatStayInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"shared/app.conf":  "shared content",
		"app/compose.yaml": "symlink:../shared/compose.yaml",
		"shared/compose.yaml": "services:\n  web:\n    image: busybox\n    configs: [c]\n" +
			"configs:\n  c:\n    file: ./app.conf\n",
		"app/app.conf": "symlink:../shared/app.conf",
	})
	doc, err := Compose(context.Background(), Input{Root: root, Path: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(doc.Files["app/app.conf"]); got != "shared content" {
		t.Errorf("Files[app/app.conf] = %q, want the symlink target's content", got)
	}
	if got := doc.Config.Configs["c"].File; got != "app/app.conf" {
		t.Errorf("configs.c.file = %q, want app/app.conf", got)
	}
}

func TestComposeKeepsEnvFileValuesLiteralAndUnderTheServiceEnvironment(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"compose.yaml": "services:\n  web:\n    image: busybox\n    env_file: [a.env, b.env]\n    environment:\n      - SHARED=compose\n      - BARE\n",
		"a.env":        "SHARED=a\nONLY_A=$HOME\nBARE=a\n",
		"b.env":        "ONLY_B=b\nFROM_VARS\n",
	})
	doc, err := Compose(context.Background(), Input{Root: root, Variables: map[string]string{"FROM_VARS": "v", "BARE": "inline"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range doc.Config.Services[0].Environment {
		got[k] = "<nil>"
		if v != nil {
			got[k] = *v
		}
	}
	want := map[string]string{"SHARED": "compose", "ONLY_A": "$HOME", "ONLY_B": "b", "FROM_VARS": "v", "BARE": "inline"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if doc.Config.Services[0].EnvFile != nil {
		t.Errorf("env_file = %v, want it consumed", doc.Config.Services[0].EnvFile)
	}
}

func TestComposeStopsWhenContextIsCancelled(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"compose.yaml": "services:\n  web:\n    image: busybox\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compose(ctx, Input{Root: root}); !errors.Is(err, context.Canceled) {
		t.Errorf("Compose(cancelled) = %v, want context.Canceled", err)
	}
}

func TestComposeRefusesConfigWithoutSource(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"compose.yaml": "services:\n  web:\n    image: busybox\nconfigs:\n  c:\n    labels: {a: b}\n"})
	_, err := Compose(context.Background(), Input{Root: root})
	if want := "compose.yaml:5: configs.c: needs file, external or driver"; err == nil || err.Error() != want {
		t.Errorf("Compose() = %v, want %q", err, want)
	}
}

// Options that would hand a container its node (privileged, devices, the
// host's pid, ipc or network namespace, security_opt) are not service
// options in Swarm: they are dropped, as docker stack deploy drops them,
// and the document says so.
func TestComposeWarnsOfHostOptionsSwarmHasNot(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"compose.yaml": "services:\n  web:\n    image: a\n    privileged: true\n    devices: [/dev/sda]\n" +
		"    pid: host\n    ipc: host\n    network_mode: host\n    security_opt: [apparmor:unconfined]\n"})
	doc, err := Compose(context.Background(), Input{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ignoring unsupported options: devices, ipc, network_mode, pid, privileged, security_opt"}
	if diff := cmp.Diff(want, doc.Warnings); diff != "" {
		t.Errorf("Compose() warnings (-want +got):\n%s", diff)
	}
}
