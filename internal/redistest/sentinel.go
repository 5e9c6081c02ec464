package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the name the sentinels of [StartSentinel] monitor.
const SentinelMaster = "mymaster"

// Sentinel is a Sentinel setup: two data nodes (a master and its replica
// at the start) and three sentinels that monitor them under
// [SentinelMaster] with a quorum of two, a node counted down after 1s.
type Sentinel struct {
	Nodes     []*Server // the data nodes: Nodes[0] is the master at the start
	Sentinels []*Server
}

// SentinelAddrs returns the sentinels' addresses, for
// redis.FailoverOptions.SentinelAddrs.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr()
	}
	return addrs
}

// StartSentinel starts the setup: the master, then the replica (made one
// with REPLICAOF, so that a Restart brings it back as an empty master, as
// a node that lost its disk would be) until its link is up, then the
// sentinels (redis-server --sentinel with a generated config) until each
// knows the replica and the two other sentinels. Everything is stopped at
// t.Cleanup.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	requireRedis(tb)
	st := &Sentinel{}
	for range 2 {
		// No 5s delay before a full sync: a replica follows at once.
		n := newServer(tb, tb.TempDir(), "--repl-diskless-sync-delay", "0")
		n.start()
		tb.Cleanup(n.Stop)
		st.Nodes = append(st.Nodes, n)
	}
	master, replica := st.Nodes[0], st.Nodes[1]
	if r, err := replica.Do("REPLICAOF", "127.0.0.1", strconv.Itoa(master.Port())); err != nil || r != "+OK" {
		tb.Fatalf("redistest: REPLICAOF on %s = %q, %v", replica.Addr(), r, err)
	}
	if !waitFor(context.Background(), startTimeout, func() bool {
		info, err := replica.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	}) {
		tb.Fatalf("redistest: replica %s did not sync with %s within %v", replica.Addr(), master.Addr(), startTimeout)
	}
	for range 3 {
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s %d\n"+
			"sentinel parallel-syncs %[1]s 1\n", SentinelMaster, master.Port(), failoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatalf("redistest: writing %s: %v", conf, err)
		}
		n := newServer(tb, dir)
		n.conf, n.sentinel = conf, true
		n.start()
		tb.Cleanup(n.Stop)
		st.Sentinels = append(st.Sentinels, n)
	}
	for _, n := range st.Sentinels {
		if !waitFor(context.Background(), startTimeout, func() bool {
			m := sentinelMaster(n)
			return m["num-slaves"] == "1" && m["num-other-sentinels"] == "2"
		}) {
			tb.Fatalf("redistest: sentinel %s did not see the replica and the other sentinels within %v: %v", n.Addr(), startTimeout, sentinelMaster(n))
		}
	}
	return st
}

// sentinelMaster returns SENTINEL MASTER's fields as a sentinel sees them.
func sentinelMaster(n *Server) map[string]string {
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(n.Port()), "SENTINEL", "MASTER", SentinelMaster).Output()
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	m := make(map[string]string, len(lines)/2)
	for i := 0; i+1 < len(lines); i += 2 {
		m[lines[i]] = lines[i+1]
	}
	return m
}

// Master returns the data node that the first sentinel names master, or
// nil if it names none of them (or cannot be asked).
func (s *Sentinel) Master() *Server {
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(s.Sentinels[0].Port()), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster).Output()
	if err != nil {
		return nil
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return nil
	}
	addr := net.JoinHostPort(f[0], f[1])
	for _, n := range s.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// failoverTimeout is the sentinels' failover-timeout: a failover whose
// promotion the leader has not seen within it is aborted, and a forced
// one is not tried again by the sentinels.
const failoverTimeout = 5 * time.Second

// Failover forces a failover (SENTINEL FAILOVER on the first sentinel)
// and waits, as [Sentinel.WaitMaster] does, until every sentinel names
// the other data node master. A forced failover that the sentinels
// aborted (its promotion not seen within their failover-timeout, which a
// starved process can miss) is forced again, up to three times, as an
// operator would; it reports what went wrong, with what each sentinel
// says, or "" once the replica is master. Unloaded, a failover is seen
// by every sentinel within about 1.2s: the leader's INFO every second
// during a failover, the others' hello every 2s.
func (s *Sentinel) Failover() string {
	old := s.Master()
	if old == nil {
		return "no sentinel names a master: " + s.describe()
	}
	want := s.Other(old)
	for range 3 {
		out, err := exec.Command("redis-cli", "-p", strconv.Itoa(s.Sentinels[0].Port()), "SENTINEL", "FAILOVER", SentinelMaster).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "OK") && !strings.Contains(string(out), "INPROG") {
			return fmt.Sprintf("SENTINEL FAILOVER = %q, %v", out, err)
		}
		// Aborted at failoverTimeout; every sentinel hears of a completed
		// one within a hello period (2s) and a poll.
		if s.WaitMaster(want, failoverTimeout+3*time.Second) {
			return ""
		}
	}
	return fmt.Sprintf("%s was not master after three forced failovers of %v each: %s", want.Addr(), failoverTimeout+3*time.Second, s.describe())
}

// describe says what each sentinel sees of the master, and each data
// node's role, for a failure message.
func (s *Sentinel) describe() string {
	var b strings.Builder
	for _, n := range s.Sentinels {
		m := sentinelMaster(n)
		fmt.Fprintf(&b, "sentinel %s: master port %s, flags %s, failover-state %s, config-epoch %s; ", n.Addr(), m["port"], m["flags"], m["failover-state"], m["config-epoch"])
	}
	for _, n := range s.Nodes {
		info, err := n.Do("INFO", "replication")
		role := "unknown"
		for _, l := range strings.Split(info, "\n") {
			if strings.HasPrefix(l, "role:") {
				role = strings.TrimSpace(strings.TrimPrefix(l, "role:"))
			}
		}
		fmt.Fprintf(&b, "node %s: role %s (%v); ", n.Addr(), role, err)
	}
	return b.String()
}

// Other returns the data node that is not n.
func (s *Sentinel) Other(n *Server) *Server {
	if s.Nodes[0] == n {
		return s.Nodes[1]
	}
	return s.Nodes[0]
}

// WaitMaster waits until every sentinel names want master and want
// answers as a master ("role:master" in INFO replication), and reports
// whether that happened within timeout.
func (s *Sentinel) WaitMaster(want *Server, timeout time.Duration) bool {
	return waitFor(context.Background(), timeout, func() bool {
		for _, n := range s.Sentinels {
			m := sentinelMaster(n)
			if m["port"] != strconv.Itoa(want.Port()) {
				return false
			}
		}
		info, err := want.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "role:master")
	})
}

// MakeReplica makes n a replica of master (REPLICAOF), as the sentinels
// do by themselves some 10s after a failover to a node that still says it
// is master, and waits until its link is up; it reports whether that
// happened within timeout.
func (s *Sentinel) MakeReplica(n, master *Server, timeout time.Duration) bool {
	if r, err := n.Do("REPLICAOF", "127.0.0.1", strconv.Itoa(master.Port())); err != nil || r != "+OK" {
		return false
	}
	return s.WaitReplica(n, timeout)
}

// WaitReplica waits until n is a replica with its link to the master up,
// and reports whether that happened within timeout.
func (s *Sentinel) WaitReplica(n *Server, timeout time.Duration) bool {
	return waitFor(context.Background(), timeout, func() bool {
		info, err := n.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
	})
}
