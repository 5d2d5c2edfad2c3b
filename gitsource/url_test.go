package gitsource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLocationNormalisesEachForm(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, in string
		want     location
		wantErr  error
	}{
		{
			name: "https: scheme and host lower-cased, default port and trailing slash dropped",
			in:   "HTTPS://Git.Example.org:443/Team/App.git/",
			want: location{transport: "https://git.example.org/Team/App.git", key: "https://git.example.org/Team/App.git",
				match: "https://git.example.org/Team/App.git", host: "https://git.example.org", scheme: "https"},
		},
		{
			name: "http user name dropped: credentials come from the file",
			in:   "http://ci@git.example.org:8080/app",
			want: location{transport: "http://git.example.org:8080/app", key: "http://git.example.org:8080/app",
				match: "http://git.example.org:8080/app", host: "http://git.example.org:8080", scheme: "http"},
		},
		{
			name: "ssh user kept for dialling, ignored for matching",
			in:   "ssh://git@git.example.org:22/team/app.git",
			want: location{transport: "ssh://git@git.example.org/team/app.git", key: "ssh://git@git.example.org/team/app.git",
				match: "ssh://git.example.org/team/app.git", host: "ssh://git.example.org", user: "git", scheme: "ssh"},
		},
		{
			name: "scp-like form dialled as written",
			in:   "git@Git.Example.org:team/app.git",
			want: location{transport: "git@Git.Example.org:team/app.git", key: "ssh://git@git.example.org/team/app.git",
				match: "ssh://git.example.org/team/app.git", host: "ssh://git.example.org", user: "git", scheme: "ssh"},
		},
		{
			name: "file URL",
			in:   "file:///srv/git/app/",
			want: location{transport: "/srv/git/app", key: "file:///srv/git/app", match: "file:///srv/git/app", host: "file://", scheme: "file"},
		},
		{
			name: "relative local path made absolute",
			in:   "./repos/../app",
			want: location{transport: filepath.Join(wd, "app"), key: "file://" + filepath.Join(wd, "app"),
				match: "file://" + filepath.Join(wd, "app"), host: "file://", scheme: "file"},
		},
		{name: "password in an https URL", in: "https://ci:hunter2@git.example.org/app", wantErr: errPasswordInURL},
		{name: "password in an scp-like URL", in: "ci:hunter2@git.example.org:app", wantErr: errPasswordInURL},
		{name: "unsupported scheme", in: "ftp://git.example.org/app", wantErr: errAny},
		{name: "no path", in: "https://git.example.org/", wantErr: errAny},
		{name: "query", in: "https://git.example.org/app?x=1", wantErr: errAny},
		{name: "file URL with a host", in: "file://server/app", wantErr: errAny},
		{name: "empty", in: "  ", wantErr: errAny},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLocation(tc.in)
			switch {
			case tc.wantErr == errAny && err == nil:
				t.Fatalf("parseLocation(%q) succeeded, want an error", tc.in)
			case tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("parseLocation(%q) error = %v, want %v", tc.in, err, tc.wantErr)
			case err != nil:
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q holds the password", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(location{})); diff != "" {
				t.Errorf("parseLocation(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestRedactURLRemovesUserinfo(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://ci:hunter2@git.example.org/team/app.git", "https://git.example.org/team/app.git"},
		{"https://token@git.example.org/app", "https://git.example.org/app"},
		{"https://ci:p%40ss@git.example.org/app", "https://git.example.org/app"},
		{"https://ci:p@ss@git.example.org/app", "https://git.example.org/app"},
		{"https://ci:pa/ss@git.example.org/app", "https://git.example.org/app"},
		{"https://ci:pa#ss@git.example.org/app", "https://git.example.org/app"},
		{"https://ci:pa ss@git.example.org/app", "https://git.example.org/app"},
		{"ssh://git@git.example.org/app", "ssh://git.example.org/app"},
		{"git@git.example.org:team/app.git", "git.example.org:team/app.git"},
		{"ci:hunter2@git.example.org/app", "git.example.org/app"},
		{"https://git.example.org/app", "https://git.example.org/app"},
		{"https://git.example.org/app@v1", "https://v1"}, // an unescaped "@" may end a password
		{"https://ci:0#00@git.example.org", "https://git.example.org"},
		{"/srv/git/app@2", "/srv/git/app@2"},
		{"", ""},
	}
	for _, tc := range cases {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedactURL checks that a password placed in a URL's userinfo never
// survives redaction, whatever surrounds it.
func FuzzRedactURL(f *testing.F) {
	f.Add("git.example.org/team/app.git", "hunter2")
	f.Add("h/x@y", "p/w#d")
	f.Add("[::1]:8080/a", "p@ss")
	f.Add("h:99999/x", "secret")
	f.Fuzz(func(t *testing.T, rest, password string) {
		bare := "https://" + rest
		if len(password) < 4 || strings.Contains(password, "%") ||
			strings.Contains(bare, password) || strings.Contains(RedactURL(bare), password) {
			t.Skip("the password also appears outside the userinfo, or is escaped")
		}
		forms := []string{"https://ci:" + password + "@" + rest}
		if !strings.Contains(password, "/") {
			// With a slash before the "@", git reads "ci:pa/ss@h" as the
			// scp-like path "pa/ss@h" on host "ci": no userinfo there.
			forms = append(forms, "ci:"+password+"@"+rest)
		}
		for _, u := range forms {
			if got := RedactURL(u); strings.Contains(got, password) {
				t.Errorf("RedactURL(%q) = %q, still holds the password", u, got)
			}
		}
	})
}
