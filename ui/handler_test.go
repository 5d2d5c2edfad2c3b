package ui_test

import (
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skep-cd/skep/ui"
)

func newServer(t *testing.T) *ui.Server {
	t.Helper()
	s, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// body returns the served text of an embedded file.
func body(t *testing.T, s *ui.Server, name string) string {
	t.Helper()
	w := get(t, s, "GET", ui.Prefix+name, nil)
	if w.Code != 200 {
		t.Fatalf("GET %s%s = %d", ui.Prefix, name, w.Code)
	}
	return w.Body.String()
}

func TestEveryUIResponseCarriesTheStrictPolicyAndSecurityHeaders(t *testing.T) {
	s := newServer(t)
	for _, tc := range []struct {
		name, method, target string
		want                 int
	}{
		{"the page", "GET", "/", 200},
		{"a script", "GET", "/ui/app.js", 200},
		{"a stylesheet", "HEAD", "/ui/style.css", 200},
		{"a missing file", "GET", "/ui/nothing.js", 404},
		{"a directory escape", "GET", "/ui/../handler.go", 404},
		{"a write", "POST", "/", 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := get(t, s, tc.method, tc.target, nil)
			if w.Code != tc.want {
				t.Errorf("%s %s = %d, want %d", tc.method, tc.target, w.Code, tc.want)
			}
			for k, want := range map[string]string{
				"Content-Security-Policy": ui.ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
				"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
			} {
				if got := w.Header().Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
		})
	}
	for _, directive := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(ui.ContentSecurityPolicy, directive) {
			t.Errorf("the policy lacks %s", directive)
		}
	}
	if strings.Contains(ui.ContentSecurityPolicy, "unsafe") {
		t.Errorf("the policy allows something unsafe: %s", ui.ContentSecurityPolicy)
	}
}

func TestEachFileIsServedWithItsContentType(t *testing.T) {
	s := newServer(t)
	for _, tc := range []struct{ target, want string }{
		{"/", "text/html; charset=utf-8"},
		{"/ui/index.html", "text/html; charset=utf-8"},
		{"/ui/app.js", "text/javascript; charset=utf-8"},
		{"/ui/api.js", "text/javascript; charset=utf-8"},
		{"/ui/style.css", "text/css; charset=utf-8"},
		{"/ui/icon.svg", "image/svg+xml"},
	} {
		if got := get(t, s, "GET", tc.target, nil).Header().Get("Content-Type"); got != tc.want {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.target, got, tc.want)
		}
	}
}

func TestAnUnchangedFileRevalidatesWithItsETag(t *testing.T) {
	s := newServer(t)
	first := get(t, s, "GET", "/ui/app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /ui/app.js: ETag %q, Cache-Control %q; want an ETag and no-cache", etag, first.Header().Get("Cache-Control"))
	}
	if w := get(t, s, "GET", "/ui/app.js", map[string]string{"If-None-Match": etag}); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("revalidation with the ETag = %d with %d bytes, want 304 and no body", w.Code, w.Body.Len())
	}
	if w := get(t, s, "GET", "/ui/style.css", map[string]string{"If-None-Match": etag}); w.Code != http.StatusOK {
		t.Errorf("another file's ETag = %d, want 200", w.Code)
	}
}

var (
	references = regexp.MustCompile(`(?:src|href)="(/ui/[^"]+)"`)
	imports    = regexp.MustCompile(`(?m)^import .* from '\./([^']+)';$`)
)

func TestEveryReferencedFileIsEmbeddedAndEveryEmbeddedFileIsUsed(t *testing.T) {
	s := newServer(t)
	embedded := s.Names()
	used := map[string]bool{"index.html": true}
	index := get(t, s, "GET", "/", nil).Body.String()
	refs := references.FindAllStringSubmatch(index, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references only %d files: %v", len(refs), refs)
	}
	for _, m := range refs {
		used[strings.TrimPrefix(m[1], ui.Prefix)] = true
	}
	for _, name := range embedded {
		if path.Ext(name) != ".js" {
			continue
		}
		for _, m := range imports.FindAllStringSubmatch(body(t, s, name), -1) {
			used[m[1]] = true
		}
	}
	for name := range used {
		if !slices.Contains(embedded, name) {
			t.Errorf("%s is referenced but not embedded", name)
		}
	}
	for _, name := range embedded {
		if !used[name] {
			t.Errorf("%s is embedded but nothing references it", name)
		}
	}
}

var (
	scriptTag    = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`)
	styleAttr    = regexp.MustCompile(`(?i)\sstyle\s*=`)
	handlerAttr  = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	externalURL  = regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	svgNamespace = "http://www.w3.org/2000/svg"
)

func TestAssetsHaveNoInlineScriptOrStyle(t *testing.T) {
	s := newServer(t)
	for _, name := range s.Names() {
		text := body(t, s, name)
		switch path.Ext(name) {
		case ".html", ".svg":
			for _, m := range scriptTag.FindAllStringSubmatch(text, -1) {
				if strings.TrimSpace(m[2]) != "" || !strings.Contains(m[1], "src=") {
					t.Errorf("%s has an inline script: %s", name, m[0])
				}
			}
			if strings.Contains(strings.ToLower(text), "<style") {
				t.Errorf("%s has a <style> element", name)
			}
			if loc := styleAttr.FindStringIndex(text); loc != nil {
				t.Errorf("%s has a style attribute at byte %d", name, loc[0])
			}
			if loc := handlerAttr.FindStringIndex(text); loc != nil {
				t.Errorf("%s has an inline event handler at byte %d", name, loc[0])
			}
		case ".js":
			// Markup from strings and style attributes would be blocked by
			// the policy or open a hole in it.
			for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "'style'", "eval("} {
				if strings.Contains(text, banned) {
					t.Errorf("%s uses %s", name, banned)
				}
			}
		}
		if m := externalURL.FindString(strings.ReplaceAll(text, svgNamespace, "")); m != "" {
			t.Errorf("%s names another origin: %s", name, m)
		}
	}
}
