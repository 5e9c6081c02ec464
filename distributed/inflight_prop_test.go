package distributed

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/throttle-go/throttle"
)

// capOp is one step of a random sequence run against an in-flight cap:
// an acquisition of n units (id is its index among the acquisitions), a
// release of acquisition id's units (it was granted), or a cancel of
// acquisition id (still waiting).
type capOp struct {
	kind string // "acquire", "release", "cancel"
	id   int
	n    int
}

// genCapOps returns a random sequence of steps under cap: acquisitions
// of 1 to cap units, releases of granted ones, cancels of waiting ones,
// chosen against the rule both implementations follow (first come,
// first served; a head that does not fit blocks those behind it), which
// the runs check step by step.
func genCapOps(r *rand.Rand, capN, steps int) []capOp {
	var (
		ops     []capOp
		held    = map[int]int{} // granted: units
		queue   []capOp         // waiting, in arrival order
		used, k int
	)
	grant := func() {
		for len(queue) > 0 && used+queue[0].n <= capN {
			held[queue[0].id] = queue[0].n
			used += queue[0].n
			queue = queue[1:]
		}
	}
	for range steps {
		switch x := r.IntN(10); {
		case x < 5 || (len(held) == 0 && len(queue) == 0):
			op := capOp{kind: "acquire", id: k, n: 1 + r.IntN(capN)}
			k++
			ops = append(ops, op)
			queue = append(queue, op)
			grant()
		case x < 8 && len(held) > 0:
			ids := slices.Sorted(maps.Keys(held))
			id := ids[r.IntN(len(ids))]
			ops = append(ops, capOp{kind: "release", id: id})
			used -= held[id]
			delete(held, id)
			grant()
		case len(queue) > 0:
			i := r.IntN(len(queue))
			ops = append(ops, capOp{kind: "cancel", id: queue[i].id})
			queue = slices.Delete(queue, i, i+1)
			grant()
		}
	}
	return ops
}

// runCapLocal runs ops against a throttle.Limiter key's cap (Acquire in a
// goroutine per acquisition, in a synctest bubble so that each step
// settles) and returns the acquisitions granted after each step.
func runCapLocal(t *testing.T, capN int, ops []capOp) [][]int {
	var out [][]int
	synctest.Test(t, func(t *testing.T) {
		a := (&throttle.Limiter{InFlight: capN}).For("k")
		var (
			mu       sync.Mutex
			granted  = map[int]func(){}
			cancels  = map[int]context.CancelFunc{}
			released = map[int]bool{}
			wg       sync.WaitGroup
		)
		for _, op := range ops {
			switch op.kind {
			case "acquire":
				ctx, cancel := context.WithCancel(context.Background())
				cancels[op.id] = cancel
				wg.Go(func() {
					release, err := a.Acquire(ctx, op.n)
					if err == nil {
						mu.Lock()
						granted[op.id] = release
						mu.Unlock()
					}
				})
			case "release":
				mu.Lock()
				granted[op.id]()
				released[op.id] = true
				mu.Unlock()
			case "cancel":
				cancels[op.id]()
			}
			synctest.Wait()
			mu.Lock()
			var now []int
			for id := range granted {
				if !released[id] {
					now = append(now, id)
				}
			}
			mu.Unlock()
			slices.Sort(now)
			out = append(out, now)
		}
		for _, cancel := range cancels {
			cancel()
		}
		wg.Wait()
		for _, release := range granted {
			release()
		}
	})
	return out
}

// runCapRedis runs ops against the in-flight script, one call per step
// (an acquisition's first call, a release or a cancel, which is a
// release of a waiting one), then asks for each waiting acquisition
// again (a call a woken waiter makes; it changes nothing) to learn the
// acquisitions granted after each step.
func runCapRedis(t *testing.T, w *keyWaiter, ops []capOp) [][]int {
	t.Helper()
	ctx := context.Background()
	tokens := map[int]string{}
	waiting := map[int]bool{}
	held := map[int]bool{}
	var out [][]int
	for _, op := range ops {
		switch op.kind {
		case "acquire":
			tokens[op.id] = fmt.Sprintf("%d:prop.%d", op.n, op.id)
			waiting[op.id] = true
			if _, err := w.lease(ctx, "acquire", tokens[op.id]); err != nil {
				t.Fatal(err)
			}
		case "release", "cancel":
			delete(held, op.id)
			delete(waiting, op.id)
			if _, err := w.lease(ctx, "release", tokens[op.id]); err != nil {
				t.Fatal(err)
			}
		}
		for id := range waiting {
			r, err := w.lease(ctx, "acquire", tokens[id])
			if err != nil {
				t.Fatal(err)
			}
			if r.status == leaseGranted {
				delete(waiting, id)
				held[id] = true
			}
		}
		out = append(out, slices.Sorted(maps.Keys(held)))
	}
	return out
}

// TestInFlightModel: random sequences of acquisitions, releases and
// cancels under random caps, against the throttle.Limiter's cap and the Redis
// script: after every step both have granted exactly the acquisitions
// the rule grants (first come, first served, a head that does not fit
// blocking those behind it, a cancel or release giving back exactly its
// units), never more than the cap in all.
func TestInFlightModel(t *testing.T) {
	_, c := startRedis(t)
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 8))
		capN := 1 + r.IntN(5)
		ops := genCapOps(r, capN, 60)
		want := modelGrants(capN, ops)
		t.Run(fmt.Sprintf("seed=%d/cap=%d", seed, capN), func(t *testing.T) {
			q := capLimiter(t, c, fmt.Sprintf("model-%d", seed), capN)
			local := runCapLocal(t, capN, ops)
			redisRun := runCapRedis(t, q.For("k").(*keyWaiter), ops)
			units := map[int]int{}
			for _, op := range ops {
				if op.kind == "acquire" {
					units[op.id] = op.n
				}
			}
			for i := range ops {
				for name, got := range map[string][]int{"Limiter": local[i], "Redis": redisRun[i]} {
					if !slices.Equal(got, want[i]) {
						t.Fatalf("step %d (%+v): %s granted %v; want %v\nops: %+v", i, ops[i], name, got, want[i], ops[:i+1])
					}
					sum := 0
					for _, id := range got {
						sum += units[id]
					}
					if sum > capN {
						t.Fatalf("step %d: %s holds %d units under a cap of %d", i, name, sum, capN)
					}
				}
			}
		})
	}
}

// modelGrants is the rule itself: the acquisitions held after each step.
func modelGrants(capN int, ops []capOp) [][]int {
	held := map[int]int{}
	var queue []capOp
	used := 0
	var out [][]int
	for _, op := range ops {
		switch op.kind {
		case "acquire":
			queue = append(queue, op)
		case "release":
			used -= held[op.id]
			delete(held, op.id)
		case "cancel":
			queue = slices.DeleteFunc(queue, func(o capOp) bool { return o.id == op.id })
		}
		for len(queue) > 0 && used+queue[0].n <= capN {
			held[queue[0].id] = queue[0].n
			used += queue[0].n
			queue = queue[1:]
		}
		out = append(out, slices.Sorted(maps.Keys(held)))
	}
	return out
}
