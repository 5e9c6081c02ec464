package distributed

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/internal/redistest"
	"golang.org/x/time/rate"
)

// BenchmarkTransportRatio alternates a bare http.Client and one whose
// throttle.Transport waits on a Limiter with a limit far above the load, in
// rounds of 400 GETs from 8 goroutines on a loopback server within one
// loop, so that both see the same machine; it reports the Transport's
// throughput as a fraction of the bare client's ("ratio"), with leases
// (the default) and without (MaxLease 1: a Redis call per request), and
// the Redis calls per request; with leases, what the waits met per 1,000
// requests (leaseStats: waits that waited for a call, a lease or the held
// turns asked again; of them those that started it, the tickets having
// run out with none in flight, and those held by a lease made ahead that
// came late; and the tickets that went unused), the proxies of the stalls that ratio measures on a noisy
// machine. The server sends no rate-limit headers: a
// response that says something costs an Observe call of its own.
func BenchmarkTransportRatio(b *testing.B) {
	for _, tt := range []struct {
		name     string
		maxLease int
	}{{"leases", 0}, {"no-leases", 1}, {"in-process", -1}} {
		b.Run(tt.name, func(b *testing.B) {
			s, c := startRedis(b)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"ok":true}`)
			}))
			defer srv.Close()
			q := New(c, "bench-transport", throttle.Limit{Rate: rate.Limit(1e9), Burst: 1e6})
			q.MaxLease = tt.maxLease
			q.Timeout = time.Second // a busy machine is no outage
			defer q.Close()
			// Each client its own connections, kept (the default keeps 2
			// idle per host: 8 goroutines would dial all the time).
			bare := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var waiter throttle.Waiter = q
			if tt.maxLease < 0 {
				waiter = &throttle.Limiter{} // the Transport's own cost, for reference
			}
			thr := &http.Client{Transport: &throttle.Transport{Base: &http.Transport{MaxIdleConnsPerHost: 64}, Waiter: waiter}}
			defer bare.CloseIdleConnections()
			defer thr.Transport.(*throttle.Transport).Base.(*http.Transport).CloseIdleConnections()
			const workers, per = 8, 50
			round := func(c *http.Client) time.Duration {
				start := time.Now()
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for range per {
							resp, err := c.Get(srv.URL)
							if err != nil {
								b.Error(err)
								return
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
				return time.Since(start)
			}
			round(bare) // warm up: connections, script load
			round(thr)
			st0 := leaseStatsOf(q)
			before := commandStats(b, s)["evalsha"]
			usecBefore := redisUsec(b, s)
			var tBare, tThr time.Duration
			rounds := 0
			for b.Loop() {
				tBare += round(bare)
				tThr += round(thr)
				rounds++
			}
			calls := commandStats(b, s)["evalsha"] - before
			usec := redisUsec(b, s) - usecBefore
			n := float64(rounds * workers * per)
			b.ReportMetric(float64(tBare.Nanoseconds())/n, "ns/req-bare")
			b.ReportMetric(float64(tThr.Nanoseconds())/n, "ns/req-quota")
			b.ReportMetric(float64(tBare)/float64(tThr), "ratio")
			b.ReportMetric(float64(calls)/n, "calls/req")
			b.ReportMetric(usec/n, "redis-µs/req")
			if tt.maxLease == 0 {
				st, k := leaseStatsOf(q), 1000/n
				b.ReportMetric(float64(st.stalled-st0.stalled)*k, "stalls/1k")
				b.ReportMetric(float64(st.cold-st0.cold)*k, "cold/1k")
				b.ReportMetric(float64(st.onAhead-st0.onAhead)*k, "on-ahead/1k")
				b.ReportMetric(float64(st.late-st0.late)*k, "late-leases/1k")
				b.ReportMetric(float64(st.expired-st0.expired)*k, "expired/1k")
				b.ReportMetric(float64((st.stallTime-st0.stallTime).Microseconds())/n, "stall-µs/req")
			}
		})
	}
}

// leaseStatsOf sums the counts of q's lease boxes.
func leaseStatsOf(q *Limiter) leaseStats {
	q.leases.mu.Lock()
	defer q.leases.mu.Unlock()
	var sum leaseStats
	for _, b := range q.leases.m {
		b.mu.Lock()
		st := b.stats
		b.mu.Unlock()
		sum.waits += st.waits
		sum.direct += st.direct
		sum.stalled += st.stalled
		sum.cold += st.cold
		sum.onAhead += st.onAhead
		sum.stallTime += st.stallTime
		sum.leases += st.leases
		sum.ahead += st.ahead
		sum.late += st.late
		sum.leased += st.leased
		sum.expired += st.expired
	}
	return sum
}

// redisUsec returns the µs Redis spent in EVALSHA so far (INFO
// commandstats).
func redisUsec(tb testing.TB, s *redistest.Server) float64 {
	tb.Helper()
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					u, _ := strconv.ParseFloat(v, 64)
					return u
				}
			}
		}
	}
	return 0
}
