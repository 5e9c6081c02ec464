package redistest

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Cluster is a Redis Cluster of three masters and no replicas.
type Cluster struct {
	Nodes []*Server // the masters, in the order they were created
}

// Addrs returns the masters' addresses, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// StartCluster starts three cluster-enabled redis-server processes, joins
// them with `redis-cli --cluster create` (16384 slots split three ways, no
// replicas) and waits until every node reports cluster_state:ok. The nodes
// are stopped at t.Cleanup.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	requireRedis(tb)
	c := &Cluster{}
	for i := 0; i < 3; i++ {
		dir := tb.TempDir()
		s := newServer(tb, dir,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
		)
		s.start()
		tb.Cleanup(s.Stop)
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	ok := waitFor(context.Background(), startTimeout, func() bool {
		for _, n := range c.Nodes {
			out, err := exec.Command("redis-cli", "-p", strconv.Itoa(n.Port()), "cluster", "info").Output()
			if err != nil || !strings.Contains(string(out), "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	if !ok {
		tb.Fatalf("redistest: cluster on %v did not reach cluster_state:ok within %v", c.Addrs(), startTimeout)
	}
	return c
}
