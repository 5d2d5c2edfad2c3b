package render

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestComposeReadsEachServicesWave(t *testing.T) {
	for _, tc := range []struct {
		name    string
		compose string
		vars    map[string]string
		want    map[string]int
		wantErr string
	}{
		{
			name:    "services without the key are in wave 0 and not listed",
			compose: "services:\n  db:\n    image: db\n  web:\n    image: web\n",
		},
		{
			name:    "a whole number puts a service in that wave",
			compose: "services:\n  db:\n    image: db\n    x-skep-wave: 0\n  web:\n    image: web\n    x-skep-wave: 2\n",
			want:    map[string]int{"web": 2},
		},
		{
			name:    "an interpolated wave is read after interpolation",
			compose: "services:\n  web:\n    image: web\n    x-skep-wave: ${WAVE}\n",
			vars:    map[string]string{"WAVE": "3"},
			want:    map[string]int{"web": 3},
		},
		{
			name:    "a word is refused at its line",
			compose: "services:\n  web:\n    image: web\n    x-skep-wave: first\n",
			wantErr: `compose.yaml:4: services.web.x-skep-wave: want a whole number from 0 to 100, got "first"`,
		},
		{
			name:    "a negative wave is refused",
			compose: "services:\n  web:\n    image: web\n    x-skep-wave: -1\n",
			wantErr: "compose.yaml:4: services.web.x-skep-wave: want a whole number from 0 to 100, got -1",
		},
		{
			name:    "a list is refused",
			compose: "services:\n  web:\n    image: web\n    x-skep-wave: [1]\n",
			wantErr: "compose.yaml:4: services.web.x-skep-wave: want a whole number from 0 to 100, got [1]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"compose.yaml": tc.compose})
			doc, err := Compose(context.Background(), Input{Root: root, Variables: tc.vars})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Compose = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, doc.Waves); d != "" {
				t.Errorf("Waves (-want +got):\n%s", d)
			}
		})
	}
}
