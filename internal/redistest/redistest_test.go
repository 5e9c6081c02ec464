package redistest

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if got, err := s.Do("SET", "k", "v"); err != nil || got != "+OK" {
		t.Fatalf("SET = %q, %v; want +OK, nil", got, err)
	}
	s.Stop()
	if _, err := s.Do("PING"); err == nil {
		t.Fatalf("PING after Stop succeeded; want an error")
	}
	s.Restart()
	if got, err := s.Do("EXISTS", "k"); err != nil || got != ":0" {
		t.Fatalf("EXISTS k after Restart = %q, %v; want :0 (nothing persisted), nil", got, err)
	}
}

func TestStartCluster(t *testing.T) {
	c := StartCluster(t)
	for _, n := range c.Nodes {
		got, err := n.Do("CLUSTER", "INFO")
		if err != nil || !strings.Contains(got, "cluster_state:ok") {
			t.Fatalf("CLUSTER INFO on %s = %q, %v; want cluster_state:ok", n.Addr(), got, err)
		}
	}
}

func TestStartSentinel(t *testing.T) {
	st := StartSentinel(t)
	if m := st.Master(); m != st.Nodes[0] {
		t.Fatalf("Master() = %v; want the first node %s", m, st.Nodes[0].Addr())
	}
	start := time.Now()
	if msg := st.Failover(); msg != "" {
		t.Fatal(msg)
	}
	if m := st.Master(); m != st.Nodes[1] {
		t.Fatalf("Master() after the failover = %v; want the replica %s", m, st.Nodes[1].Addr())
	}
	t.Logf("failover seen by every sentinel after %v", time.Since(start))
	if !st.MakeReplica(st.Nodes[0], st.Nodes[1], 10*time.Second) {
		t.Fatalf("the old master %s did not become a replica of the new one within 10s", st.Nodes[0].Addr())
	}
}

func TestStartWith(t *testing.T) {
	s := StartWith(t, Options{Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	got, err := s.Do("CONFIG", "GET", "maxmemory-policy")
	if err != nil || got != "*2" {
		t.Fatalf("CONFIG GET = %q, %v", got, err)
	}
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(s.Port()), "CONFIG", "GET", "maxmemory-policy").Output()
	if err != nil || !strings.Contains(string(out), "allkeys-lru") {
		t.Fatalf("maxmemory-policy = %q, %v; want allkeys-lru", out, err)
	}
	v := StartWith(t, Options{Bin: "valkey-server"})
	info, err := v.Do("INFO", "server")
	if err != nil || !strings.Contains(info, "valkey_version:") {
		t.Fatalf("INFO server of valkey-server = %q, %v; want valkey_version", info, err)
	}
}
