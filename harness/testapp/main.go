// Command testapp is the tiny program inside Skep's test images.
//
// It answers HTTP with its version and hostname, offers a `health`
// subcommand for a HEALTHCHECK, and can be told to report itself unhealthy.
// It is built static and shipped FROM scratch, so it needs nothing else.
//
//	testapp [serve]   listen on $TESTAPP_ADDR (default :8080)
//	testapp health    exit 0 when the local server reports healthy
//	testapp exit CODE [LINE...]  print each LINE and exit with CODE (a job)
//	testapp eat MIB   take MIB mebibytes of memory and hold them (an OOM kill)
//
// Environment: TESTAPP_VERSION (what GET / reports), TESTAPP_UNHEALTHY=1
// (/healthz answers 503, so `health` fails), TESTAPP_HEALTHY_AFTER (a Go
// duration: /healthz answers 503 until the server has run that long, a
// service that takes a while to get ready). GET /secrets/NAME answers the
// content of the Docker secret mounted at /run/secrets/NAME, so a test can
// see what the task sees.
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// main is the container's entrypoint: no flags, because a Dockerfile's
// ENTRYPOINT and HEALTHCHECK pass fixed arguments and the environment
// carries the rest.
func main() {
	addr := os.Getenv("TESTAPP_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	cmd := "serve"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	switch cmd {
	case "serve":
		os.Exit(serve(addr))
	case "health":
		os.Exit(health(addr))
	case "exit":
		os.Exit(exit(os.Args[2:]))
	case "eat":
		os.Exit(eat(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "testapp: unknown command %q (want serve, health, exit or eat)\n", cmd)
		// 2 is a usage error, as for skep itself.
		os.Exit(2)
	}
}

// reply is GET /'s JSON body; tests compare Version to see which image
// is running, and Hostname to tell replicas apart.
type reply struct {
	Version  string `json:"version"`
	Hostname string `json:"hostname"`
}

// serve listens until the process is stopped and returns the exit code.
func serve(addr string) int {
	// Without a hostname the reply leaves it empty; no reason to fail.
	host, _ := os.Hostname()
	r := reply{Version: os.Getenv("TESTAPP_VERSION"), Hostname: host}
	unhealthy := os.Getenv("TESTAPP_UNHEALTHY") == "1"
	ready := time.Now()
	if v := os.Getenv("TESTAPP_HEALTHY_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testapp: TESTAPP_HEALTHY_AFTER:", err)
			return 2
		}
		ready = ready.Add(d)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// A failed write is a client that went away; there is no one to tell.
		_ = json.NewEncoder(w).Encode(r)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if unhealthy {
			http.Error(w, "unhealthy by request", http.StatusServiceUnavailable)
			return
		}
		if time.Now().Before(ready) {
			http.Error(w, "not ready yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/secrets/{name}", func(w http.ResponseWriter, req *http.Request) {
		// Only a plain file name: nothing outside /run/secrets is served.
		name := req.PathValue("name")
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			http.Error(w, "want a secret's file name", http.StatusBadRequest)
			return
		}
		data, err := os.ReadFile("/run/secrets/" + name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(data)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "testapp:", err)
		return 1
	}
	return 0
}

// health is the HEALTHCHECK: exit 0 when the local server answers 200
// within 2s, 1 otherwise (the only two codes Docker gives meaning to).
func health(addr string) int {
	// ":8080" is a listen address; to dial it the client needs a host.
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp health:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "testapp health: status", resp.StatusCode)
		return 1
	}
	return 0
}

// exit is a job's whole run: it prints each line after the code, so tests
// can read a job's log, and returns the code (2 when it is not a number).
func exit(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "testapp exit: want a code")
		return 2
	}
	code, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp exit:", err)
		return 2
	}
	for _, line := range args[1:] {
		fmt.Println(line)
	}
	return code
}

// eat takes the memory it is told to, a mebibyte at a time, writing to
// every page so the kernel must back it, then holds it until stopped: in
// a container with a smaller memory limit the kernel kills it (OOM).
func eat(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "testapp eat: want a size in MiB")
		return 2
	}
	mib, err := strconv.Atoi(args[0])
	if err != nil || mib <= 0 {
		fmt.Fprintln(os.Stderr, "testapp eat: want a positive size in MiB")
		return 2
	}
	held := make([][]byte, 0, mib)
	for i := range mib {
		chunk := make([]byte, 1<<20)
		for j := 0; j < len(chunk); j += 4096 {
			chunk[j] = byte(i)
		}
		held = append(held, chunk)
		fmt.Printf("took %d MiB\n", i+1)
	}
	fmt.Println("holding", len(held), "MiB")
	for {
		time.Sleep(time.Hour)
		runtime.KeepAlive(held)
	}
}
