package render

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestComposeReadsEachHookWithItsPhaseAndTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		compose string
		want    map[string]Hook
		wantErr string
	}{
		{
			name:    "services without the key are no hooks",
			compose: "services:\n  web:\n    image: web\n",
		},
		{
			name:    "a pre-sync hook with a timeout and a post-sync one without",
			compose: "services:\n  migrate:\n    image: db\n    x-skep-hook: pre-sync\n    x-skep-hook-timeout: 90s\n  smoke:\n    image: web\n    x-skep-hook: post-sync\n",
			want:    map[string]Hook{"migrate": {Phase: HookPreSync, Timeout: 90 * time.Second}, "smoke": {Phase: HookPostSync}},
		},
		{
			name:    "an unknown phase is refused at its line",
			compose: "services:\n  migrate:\n    image: db\n    x-skep-hook: before\n",
			wantErr: "compose.yaml:4: services.migrate.x-skep-hook: want pre-sync, post-sync or analysis, got before",
		},
		{
			name:    "a timeout that is no duration is refused at its line",
			compose: "services:\n  migrate:\n    image: db\n    x-skep-hook: pre-sync\n    x-skep-hook-timeout: soon\n",
			wantErr: "compose.yaml:5: services.migrate.x-skep-hook-timeout: want a positive duration such as 90s or 5m, got soon",
		},
		{
			name:    "a timeout on a service that is no hook is refused",
			compose: "services:\n  web:\n    image: web\n    x-skep-hook-timeout: 1m\n",
			wantErr: "compose.yaml:4: services.web.x-skep-hook-timeout: set on a service that is no hook (x-skep-hook is missing)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"compose.yaml": tc.compose})
			doc, err := Compose(context.Background(), Input{Root: root})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Compose = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, doc.Hooks); d != "" {
				t.Errorf("Hooks (-want +got):\n%s", d)
			}
		})
	}
}
