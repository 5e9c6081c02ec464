package throttle

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostilePolicy returns a valid Structured Field List of n bytes or a few
// more: named draft-08 policies, so that a parser that takes it on parses
// every member.
func hostilePolicy(n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d";q=100;w=60`, i)
	}
	return b.String()
}

// heapSampler records the largest heap seen (live objects and dead ones not
// yet swept, as runtime/metrics counts them) while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done sync.WaitGroup
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startSampler() *heapSampler {
	s := &heapSampler{stop: make(chan struct{})}
	s.peak.Store(heapObjects())
	s.done.Go(func() {
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				if h := heapObjects(); h > s.peak.Load() {
					s.peak.Store(h)
				}
			}
		}
	})
	return s
}

func (s *heapSampler) end() uint64 {
	close(s.stop)
	s.done.Wait()
	if h := heapObjects(); h > s.peak.Load() {
		s.peak.Store(h)
	}
	return s.peak.Load()
}

// hostileRun is what one client kind cost over every round.
type hostileRun struct {
	elapsed   time.Duration
	peak      uint64 // the largest heap in any round
	allocated uint64 // bytes allocated over every round
}

// TestHostileHeaderCost measures what a 9.5 MB RateLimit-Policy (under
// net/http's 10 MB limit for response headers) costs 8 concurrent clients
// through Transport, against a bare http.Client on the same server, in
// alternating rounds of one run so that both see the same machine. It
// fails when the Transport's peak heap or time is over twice the bare
// client's. It is slow and memory-hungry, so it runs only when
// THROTTLE_HOSTILE is set:
//
//	THROTTLE_HOSTILE=1 go test -run TestHostileHeaderCost -v .
func TestHostileHeaderCost(t *testing.T) {
	if os.Getenv("THROTTLE_HOSTILE") == "" {
		t.Skip("set THROTTLE_HOSTILE=1 to measure a 9.5 MB header through Transport against a bare client")
	}
	const clients, rounds = 8, 3
	policy := hostilePolicy(9_500_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Ratelimit-Policy"] = []string{policy}
		w.Header()["Ratelimit"] = []string{`"p0";r=50;t=30`}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	base.MaxIdleConnsPerHost = clients
	defer base.CloseIdleConnections()
	bare := srv.Client()
	thr := &http.Client{Transport: &Transport{Base: base, Waiter: &Limiter{}}}

	round := func(c *http.Client, run *hostileRun) {
		runtime.GC()
		sampler := startSampler()
		allocated := heapAllocated()
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n := len(resp.Header.Get("Ratelimit-Policy")); n < 9_500_000 {
					t.Errorf("RateLimit-Policy arrived with %d bytes; want 9.5 MB", n)
				}
			})
		}
		wg.Wait()
		run.elapsed += time.Since(start)
		run.allocated += heapAllocated() - allocated
		run.peak = max(run.peak, sampler.end())
	}
	var b, tr hostileRun
	round(bare, &b) // warm up both: connections, the server's buffers
	round(thr, &tr)
	b, tr = hostileRun{}, hostileRun{}
	for range rounds {
		round(bare, &b)
		round(thr, &tr)
	}
	mb := func(n uint64) float64 { return float64(n) / 1e6 }
	t.Logf("%d clients × %d rounds, RateLimit-Policy of %d bytes", clients, rounds, len(policy))
	t.Logf("bare:      %8.1f ms  peak heap %7.1f MB  allocated %8.1f MB", float64(b.elapsed.Microseconds())/1e3, mb(b.peak), mb(b.allocated))
	t.Logf("Transport: %8.1f ms  peak heap %7.1f MB  allocated %8.1f MB", float64(tr.elapsed.Microseconds())/1e3, mb(tr.peak), mb(tr.allocated))
	timeRatio, peakRatio := float64(tr.elapsed)/float64(b.elapsed), float64(tr.peak)/float64(b.peak)
	t.Logf("Transport/bare: time %.2f×  peak heap %.2f×  allocated %.2f×", timeRatio, peakRatio, float64(tr.allocated)/float64(b.allocated))
	if timeRatio > 2 || peakRatio > 2 {
		t.Errorf("Transport costs %.2f× the time and %.2f× the peak heap of a bare client; want at most 2×", timeRatio, peakRatio)
	}
}
