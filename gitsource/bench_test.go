package gitsource

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
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

// BenchmarkListRefsOfManyRepositories is the ls-remotes of quiet ticks at
// 500 applications over 50 repositories: each op asks the next of 50
// repositories anew (Forget), as the phased ticks of their applications
// do. The git server runs in a process of its own, so cpu-ns/op (this
// process's CPU per ls-remote, getrusage) is the client's alone: the
// Cache, net/http and the kernel's work for this process.
func BenchmarkListRefsOfManyRepositories(b *testing.B) {
	const repositories = 50
	root := b.TempDir()
	src := newTestRepo(b, filepath.Join(b.TempDir(), "src"))
	src.commit("head", map[string]string{"README": "head\n", "app/compose.yaml": "services: {}\n"})
	urls := make([]string, repositories)
	server := harness.StartGitServerProcess(b, root)
	for i := range urls {
		name := fmt.Sprintf("app%02d", i)
		src.bareCopy(filepath.Join(root, name+".git"))
		urls[i] = server.URL + "/" + name + ".git"
	}
	c := newCache(b, Options{})
	for _, url := range urls {
		if _, err := c.ListRefs(b.Context(), url); err != nil {
			b.Fatal(err)
		}
	}
	start := cpuTime(b)
	i := 0
	for b.Loop() {
		url := urls[i%repositories]
		i++
		c.Forget(url)
		if _, err := c.ListRefs(b.Context(), url); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
