package gitsource

import (
	"path/filepath"
	"testing"
)

// BenchmarkListRefs is one ls-remote over smart HTTP: what each
// application's tick asks of its repository when nothing else asked it in
// that tick. The server (git http-backend) runs in a process of its own,
// so -benchmem counts the client's allocations; its time per call
// includes the server's.
func BenchmarkListRefs(b *testing.B) {
	root := b.TempDir()
	newHistory(b, filepath.Join(root, "app"))
	server := serveHTTP(b, root, "", "", "")
	c := newCache(b, Options{})
	url := server.URL + "/app"
	for b.Loop() {
		c.Forget(url)
		if _, err := c.ListRefs(b.Context(), url); err != nil {
			b.Fatal(err)
		}
	}
}
