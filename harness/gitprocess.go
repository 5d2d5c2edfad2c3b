package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/githttp"
)

// gitProcessRoot, in a test binary's environment, makes ServeGitProcess
// serve that directory instead of running the tests.
const gitProcessRoot = "SKEP_HARNESS_GIT_ROOT"

// ServeGitProcess is for a test binary's TestMain: when the binary was
// started by StartGitServerProcess, it serves the repositories it was given
// over smart HTTP until its standard input closes, and returns true;
// otherwise it returns false at once and the tests run.
func ServeGitProcess() bool {
	root := os.Getenv(gitProcessRoot)
	if root == "" {
		return false
	}
	srv, err := githttp.Start(githttp.Options{Root: root})
	if err != nil {
		fmt.Fprintln(os.Stderr, "git server:", err)
		os.Exit(1)
	}
	fmt.Println(srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes it
	_ = srv.Close()
	return true
}

// GitServerProcess serves a GitServer's repositories from a process of
// its own, so that the CPU a test process spends is its own and not the
// server's: a benchmark of what a client spends asks it through URL.
type GitServerProcess struct {
	URL string // the base address, as GitServer.URL
	pid int
}

// StartGitServerProcess serves root from a copy of the running test binary
// (whose TestMain calls ServeGitProcess) until the test ends.
func StartGitServerProcess(tb testing.TB, root string) *GitServerProcess {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), gitProcessRoot+"="+root)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("git server process: %v", err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		tb.Fatalf("git server process: no address (%q, %v); does the test binary's TestMain call harness.ServeGitProcess?", line, err)
	}
	return &GitServerProcess{URL: strings.TrimSpace(line), pid: cmd.Process.Pid}
}

// CPU is the user and system CPU time the server process and the
// processes it waited for (each request's `git http-backend`) spent so
// far, at the kernel's clock-tick resolution.
func (p *GitServerProcess) CPU(tb testing.TB) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		tb.Fatalf("git server process: %v", err)
	}
	// The fields after the command name, which is in parentheses: utime,
	// stime, cutime and cstime are the 14th to 17th of the whole line.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			tb.Fatalf("git server process: /proc stat field %q: %v", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's
// times: 100 on every Linux architecture Skep builds for.
const clockTicks = 100
