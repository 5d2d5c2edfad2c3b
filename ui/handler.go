package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// ContentSecurityPolicy is set on every UI response: scripts, styles and
// connections from the controller's own origin only, no inline code, no
// framing, and forms that post nowhere else.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Prefix is the path under which the UI's files are served; the page
// itself is served at /.
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// headers are the security headers of every UI response.
var headers = map[string]string{
	"Content-Security-Policy":    ContentSecurityPolicy,
	"X-Content-Type-Options":     "nosniff",
	"X-Frame-Options":            "DENY",
	"Referrer-Policy":            "no-referrer",
	"Cross-Origin-Opener-Policy": "same-origin",
	"Permissions-Policy":         "camera=(), microphone=(), geolocation=()",
}

// contentTypes maps the extensions of the embedded files to their types.
// A file with another extension is not served.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// file is one embedded asset, read once.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Server serves the embedded UI. It is immutable after New and safe for
// concurrent use.
type Server struct {
	files map[string]file // by name relative to assets/
}

// New reads the embedded assets and returns their server. It fails only
// when the build embedded a file of a type it does not know, which is a
// bug of the build, not of input.
func New() (*Server, error) {
	s := &Server{files: map[string]file{}}
	err := fs.WalkDir(assets, "assets", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("ui asset %s: no content type for %q", name, path.Ext(name))
		}
		body, err := assets.ReadFile(name)
		if err != nil {
			return fmt.Errorf("ui asset %s: %w", name, err)
		}
		sum := sha256.Sum256(body)
		s.files[strings.TrimPrefix(name, "assets/")] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded ui: %w", err)
	}
	if _, ok := s.files["index.html"]; !ok {
		return nil, fmt.Errorf("read embedded ui: no index.html")
	}
	return s, nil
}

// Names returns the names of the embedded files, relative to Prefix.
func (s *Server) Names() []string {
	out := make([]string, 0, len(s.files))
	for name := range s.files {
		out = append(out, name)
	}
	return out
}

// ServeHTTP answers GET and HEAD of / (the page) and of Prefix+name (its
// files), with the security headers, the content type and an ETag that is
// the file's content hash; browsers revalidate (Cache-Control: no-cache)
// and get 304 while the binary is the same. Anything else is a plain-text
// 404 or 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	for k, v := range headers {
		h.Set(k, v)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if r.URL.Path == "/" {
		name, ok = "index.html", true
	}
	f, found := s.files[name]
	if !ok || !found {
		h.Set("Cache-Control", "no-store")
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", f.contentType)
	h.Set("Content-Length", fmt.Sprint(len(f.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(f.body) // the client went away; nothing left to tell it
	}
}

// etagMatches reports whether an If-None-Match list names etag (or *).
func etagMatches(list, etag string) bool {
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == etag || v == "*" {
			return true
		}
	}
	return false
}
