package render

import (
	"strings"
	"testing"
)

func TestLoadRendersADocumentFromMemoryOnly(t *testing.T) {
	files := map[string][]byte{"files/app.conf": []byte("listen=80\n")}
	for _, tc := range []struct {
		name    string
		compose string
		vars    map[string]string
		wantErr string
	}{
		{
			name:    "a config file is read from the files map, keyed as given",
			compose: "services:\n  web:\n    image: ${IMAGE}\n    configs: [app]\nconfigs:\n  app:\n    file: files/app.conf\n",
			vars:    map[string]string{"IMAGE": "nginx:1"},
		},
		{
			name:    "a file outside the map is not found, with the document's line",
			compose: "services:\n  web:\n    image: nginx\nconfigs:\n  app:\n    file: /etc/passwd\n",
			wantErr: "chart.yaml:6: configs.app.file: absolute path /etc/passwd is outside the repository",
		},
		{
			name:    "a missing file is reported, not read from disk",
			compose: "services:\n  web:\n    image: nginx\nconfigs:\n  app:\n    file: render.go\n",
			wantErr: "configs.app.file: render.go: file does not exist",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Load(t.Context(), "chart.yaml", []byte(tc.compose), files, tc.vars)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load() = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() = %v", err)
			}
			if got := doc.Config.Services[0].Image; got != "nginx:1" {
				t.Errorf("image = %q, want nginx:1 (interpolated from vars)", got)
			}
			if got := string(doc.Files["files/app.conf"]); got != "listen=80\n" {
				t.Errorf("Files[files/app.conf] = %q, want the map's content", got)
			}
		})
	}
}
