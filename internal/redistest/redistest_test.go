package redistest

import (
	"strings"
	"testing"

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
