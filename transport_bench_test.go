package throttle

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
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

// The anchor: a bare http.Client on a loopback server.
func BenchmarkClientBare(b *testing.B) {
	srv := benchServer(b)
	benchClient(b, srv.Client(), srv.URL)
}

// The same through a Transport with an unlimited per-key Limiter: the
// overhead of key lookup, waiting, header parsing and retry bookkeeping.
func BenchmarkClientTransport(b *testing.B) {
	srv := benchServer(b)
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Waiter: &Limiter{}}}
	benchClient(b, client, srv.URL)
}
