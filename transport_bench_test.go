package throttle

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// benchServer answers every request with a small body and the rate-limit
// headers a typical API sends, so the Transport parses them on each
// response.
func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "4999")
		h.Set("X-RateLimit-Reset", "1893456000")
		io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchClient(b *testing.B, client *http.Client, url string) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkClient compares parallel GETs on a loopback server through a
// bare http.Client (the anchor) and through a Transport with an unlimited
// per-key Limiter: the overhead of key lookup, waiting, header parsing and
// retry bookkeeping. Both run in each -count round, one after the other,
// so that the machine's drift between rounds hits both alike.
func BenchmarkClient(b *testing.B) {
	srv := benchServer(b)
	b.Run("anchor=bare", func(b *testing.B) {
		benchClient(b, srv.Client(), srv.URL)
	})
	b.Run("transport", func(b *testing.B) {
		client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Waiter: &Limiter{}}}
		benchClient(b, client, srv.URL)
	})
}

// BenchmarkClientRatio alternates the two clients of BenchmarkClient in
// rounds of 200 GETs from 4 goroutines within one loop, so that both see
// the same machine, and reports each one's time per request and the
// Transport's throughput as a fraction of the bare client's ("ratio").
func BenchmarkClientRatio(b *testing.B) {
	srv := benchServer(b)
	bare := srv.Client()
	thr := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Waiter: &Limiter{}}}
	round := func(c *http.Client) time.Duration {
		const workers, per = 4, 50
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
	var tBare, tThr time.Duration
	rounds := 0
	for b.Loop() {
		tBare += round(bare)
		tThr += round(thr)
		rounds++
	}
	n := float64(rounds * 200)
	b.ReportMetric(float64(tBare.Nanoseconds())/n, "ns/req-bare")
	b.ReportMetric(float64(tThr.Nanoseconds())/n, "ns/req-transport")
	b.ReportMetric(float64(tBare)/float64(tThr), "ratio")
}
