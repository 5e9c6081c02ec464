package throttletest

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Direct is an [http.RoundTripper] that serves each request with Handler in
// the calling goroutine: no socket, no server goroutine. Inside a
// testing/synctest bubble it runs on the bubble's fake time (a goroutine
// blocked on a real socket would keep the bubble from ever going idle), so
// a client's pacing against a server of this package is tested exactly and
// in milliseconds of real time:
//
//	srv := throttletest.NewLeakyBucket(10)
//	client := &http.Client{Transport: &throttle.Transport{
//		Base: &throttletest.Direct{Handler: srv},
//	}}
//
// Latency delays each request on its way to the handler and each response
// on its way back; Jitter adds a random extra delay, uniform in [0,
// Jitter), on the way there, the dispatch jitter a strict server sees from
// a real client. The random numbers come from a generator seeded with
// Seed, so a run is repeatable.
//
// The response is complete when RoundTrip returns (its body in memory). A
// request whose context ends during a delay returns the context's error
// without reaching the handler (or, on the way back, without its
// response). The zero Direct has a nil Handler and answers every request
// with 404; it is safe for concurrent use.
type Direct struct {
	Handler http.Handler  // serves every request; nil answers 404
	Latency time.Duration // one way, each direction; zero means none
	Jitter  time.Duration // up to this much more on the way there; zero means none
	Seed    uint64        // seeds the jitter

	mu  sync.Mutex // protects rng
	rng *rand.Rand
}

func (d *Direct) jitter() time.Duration {
	if d.Jitter <= 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rng == nil {
		d.rng = rand.New(rand.NewPCG(d.Seed, d.Seed^0x9e3779b97f4a7c15))
	}
	return time.Duration(d.rng.Int64N(int64(d.Jitter)))
}

// RoundTrip serves req with Handler. It closes req's body, as the
// RoundTripper contract asks.
func (d *Direct) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	ctx := req.Context()
	if err := pause(req, d.Latency+d.jitter()); err != nil {
		return nil, err
	}
	h := d.Handler
	if h == nil {
		h = http.NotFoundHandler()
	}
	sreq := req.Clone(ctx) // what a server gets is its own copy
	sreq.RequestURI = req.URL.RequestURI()
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, sreq)
	resp := rec.Result()
	resp.Request = req
	body := rec.Body.Bytes()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	if err := pause(req, d.Latency); err != nil {
		return nil, err
	}
	return resp, nil
}

// pause sleeps d, or until req's context ends.
func pause(req *http.Request, d time.Duration) error {
	ctx := req.Context()
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
