package servertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"golang.org/x/time/rate"
)

// nginxStartTimeout bounds how long nginx may take to accept connections.
const nginxStartTimeout = 10 * time.Second

// nginxConf is the configuration of an nginx serving one static file
// under limit_req, one process in the foreground, every path under the
// prefix. limit_req runs in the preaccess phase, so the location serves
// a file (a return would answer before it); it refuses with 429 instead
// of its default 503.
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s/tmp/body;
	proxy_temp_path %[1]s/tmp/proxy;
	fastcgi_temp_path %[1]s/tmp/fastcgi;
	uwsgi_temp_path %[1]s/tmp/uwsgi;
	scgi_temp_path %[1]s/tmp/scgi;
	keepalive_requests 100000;
	limit_req_zone $server_name zone=servertest:1m rate=%[3]dr/s;
	limit_req_status 429;
	server {
		listen 127.0.0.1:%[2]d;
		server_name servertest;
		location / {
			root %[1]s/www;
			limit_req zone=servertest%[4]s;
		}
	}
}
`

// startNginx returns the start function of nginx's limit_req at r a
// second, without burst, or with burst=b nodelay: b requests beyond the
// pace go at once. nginx sends no rate-limit header, only the 429.
func startNginx(burst bool) func(t *testing.T, rng *rand.Rand, d time.Duration) *server {
	return func(t *testing.T, rng *rand.Rand, d time.Duration) *server {
		b := 0
		if burst {
			b = 1 + rng.IntN(20)
		}
		r, n := bucketRate(rng, d, b+1)
		opt, params := "", fmt.Sprintf("%vr/s", r)
		if burst {
			opt, params = fmt.Sprintf(" burst=%d nodelay", b), fmt.Sprintf("%vr/s burst=%d nodelay", r, b)
		}
		url := runNginx(t, int(r), opt)
		interval := time.Second / time.Duration(int(r))
		return &server{
			url:    url + "/index.html",
			params: params,
			told:   []throttle.Limit{{Rate: rate.Limit(r), Burst: b + 1}},
			admits: func(start, end time.Time) float64 {
				// One now and b beyond it, then one per interval
				// (nginx counts whole milliseconds).
				return float64(b+1) + float64(end.Sub(start)/interval)
			},
			requests: n,
		}
	}
}

// runNginx starts nginx with limit_req at r a second and the
// directive's options opt, on a free loopback port in a temporary
// prefix, and returns its base URL. It is stopped at t.Cleanup. Where
// nginx is not installed, the test fails if CI is set (./test.sh
// installs it) and is skipped otherwise.
func runNginx(t *testing.T, r int, opt string) string {
	t.Helper()
	bin := nginxBin(t)
	dir := t.TempDir()
	for _, sub := range []string{"www", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "www", "index.html"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, port, r, opt), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("servertest: starting nginx: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(nginxStartTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("servertest: nginx on %s did not accept connections within %v: %v\n%s", addr, nginxStartTimeout, err, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nginxBin returns nginx's path: on PATH, or in /usr/sbin where Debian
// installs it (not on a normal user's PATH).
func nginxBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	msg := "servertest: nginx not found on PATH or in /usr/sbin; install it with `apt-get install -y nginx` (or run ./test.sh, which does)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("servertest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
