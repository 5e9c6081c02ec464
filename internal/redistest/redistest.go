// Package redistest starts real redis-server processes for tests: a single
// node with [Start], a three-master Cluster with [StartCluster]. Each server
// listens on 127.0.0.1 on a free port, keeps its files in t.TempDir(), and is
// stopped when the test ends.
//
// Where redis-server is not on PATH the helpers fail the test when the
// environment variable CI is set (the project's ./test.sh installs it) and
// skip it otherwise, saying how to install it.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is one redis-server process. Its methods are safe for concurrent
// use; Stop and Restart must not race with each other.
type Server struct {
	tb   testing.TB
	dir  string
	port int
	bin  string // the server binary: redis-server, valkey-server
	conf string // a config file, passed first; "" for none
	// sentinel runs the server as a Sentinel (conf is then required):
	// no persistence options.
	sentinel bool
	args     []string // extra server arguments

	mu  sync.Mutex // protects cmd
	cmd *exec.Cmd  // nil while stopped
}

// Addr returns the server's address, "127.0.0.1:port". It does not change
// across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Start starts a redis-server without persistence on a free loopback port
// and waits until it answers PING. It is stopped at t.Cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	requireRedis(tb)
	s := newServer(tb, tb.TempDir())
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

// Options are what StartWith may change.
type Options struct {
	// Bin is the server binary: "" means redis-server; "valkey-server"
	// runs Valkey (its CLI is not needed).
	Bin string
	// Args are extra server arguments, e.g. "--maxmemory-policy",
	// "allkeys-lru".
	Args []string
}

// StartWith is Start with another binary or extra arguments. A binary
// other than redis-server that is missing fails the test when CI is set
// (./test.sh installs Valkey) and skips it otherwise.
func StartWith(tb testing.TB, o Options) *Server {
	tb.Helper()
	requireRedis(tb)
	if o.Bin != "" && o.Bin != "redis-server" {
		requireBin(tb, o.Bin, "valkey-server (Debian bookworm-backports; ./test.sh installs it)")
	}
	s := newServer(tb, tb.TempDir(), o.Args...)
	s.bin = o.Bin
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

func newServer(tb testing.TB, dir string, args ...string) *Server {
	tb.Helper()
	return &Server{tb: tb, dir: dir, port: freePort(tb), args: args}
}

// Stop stops the server (SIGKILL, as a crash or a network loss would look to
// clients) and waits for the process to exit. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts a stopped server again on the same port and waits until it
// answers PING. Its data is gone: nothing is persisted.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

func (s *Server) start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	if s.sentinel {
		args = append(args, "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	)
	if !s.sentinel {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, s.args...)
	bin := s.bin
	if bin == "" {
		bin = "redis-server"
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("redistest: starting redis-server: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(startTimeout)
	for {
		reply, err := s.do("PING")
		if err == nil && reply == "+PONG" {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.tb.Fatalf("redistest: redis-server on %s did not answer PING within %v: %v\n%s", s.Addr(), startTimeout, err, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Do sends one command on a fresh connection and returns the reply: the
// first line for simple replies (e.g. "+PONG", ":1", "-ERR …"), the payload
// for a bulk string (e.g. INFO's text). It is meant for probes and
// measurements that must not disturb a client's connections; use a real
// client for anything else.
func (s *Server) Do(args ...string) (string, error) { return s.do(args...) }

func (s *Server) do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if err != nil || !strings.HasPrefix(line, "$") {
		return line, err
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return line, err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// requireRedis fails (CI set) or skips the test when redis-server or
// redis-cli is missing.
func requireRedis(tb testing.TB) {
	tb.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		requireBin(tb, bin, "`apt-get install -y redis-server`")
	}
}

// requireBin fails (CI set) or skips the test when bin is not on PATH;
// how says how to install it.
func requireBin(tb testing.TB, bin, how string) {
	tb.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		msg := fmt.Sprintf("redistest: %s not found on PATH; install it with %s (or run ./test.sh, which does)", bin, how)
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every 50ms until it returns true or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
