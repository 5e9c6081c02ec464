//go:build fleet

// The fleet column of the matrix: four processes sharing one quota
// through distributed's Limiter on a real redis-server. Built with
// -tags fleet (it needs distributed.New(client, name, limits
// ...throttle.Limit) *Limiter, whose For returns a throttle.Quota):
//
//	go test -tags fleet -count=1 -run TestMatrixFleet -v
//	THROTTLE_LONG=1 go test -tags fleet -count=1 -run TestMatrixFleet -parallel 1 -v

package servertest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
	"github.com/throttle-go/throttle/internal/redistest"
)

// fleetSize is how many processes share the quota.
const fleetSize = 4

// fleets numbers the quotas of a test binary, so that no run meets
// another's state in Redis.
var fleets atomic.Int64

// fleetOf returns the processes of a fleet of fleetSize on the Redis at
// addr: each with a client of its own and a distributed.Limiter of one
// name (a new one each run), told the server's limits or nothing (a
// Limiter with no limits, which only keeps what servers say, for all).
func fleetOf(addr string) clients {
	return clients{
		name: fmt.Sprintf("fleet of %d", fleetSize),
		make: func(t *testing.T, told []throttle.Limit) []throttle.Waiter {
			name := fmt.Sprintf("servertest-%d", fleets.Add(1))
			ws := make([]throttle.Waiter, fleetSize)
			for i := range ws {
				client := redis.NewClient(&redis.Options{Addr: addr})
				t.Cleanup(func() { client.Close() })
				lim := distributed.New(client, name, told...)
				lim.Workers = fleetSize
				t.Cleanup(func() { lim.Close() })
				ws[i] = lim
			}
			return ws
		},
	}
}

// TestMatrixFleet runs every server, told and told nothing, with a
// fleet of four processes: once each (seed 1, or THROTTLE_SEED), logged;
// with THROTTLE_LONG=1, the whole matrix as TestMatrix runs it, its
// table logged (and printed as THROTTLE_MATRIX_TABLE says). It holds no
// row to a goal yet: the fleet's figures are the baseline of issue 24's
// fleet parity.
func TestMatrixFleet(t *testing.T) {
	rs := redistest.Start(t)
	c := fleetOf(rs.Addr())
	if os.Getenv("THROTTLE_LONG") == "1" {
		longMatrix(t, c)
		return
	}
	s := seed(t)
	for _, k := range kinds {
		for _, told := range []bool{true, false} {
			t.Run(k.name+", "+map[bool]string{true: "told", false: "told nothing"}[told], func(t *testing.T) {
				r := measureRun(t, k, s, told, shortRun, c)
				t.Logf("%s", describe(r))
			})
		}
	}
}
