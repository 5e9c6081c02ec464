package throttletest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"time"
)

// Chain enforces several limits at once the way servers layer them, as
// middleware: a request goes through each layer in turn, and the first
// that refuses it answers; one admitted by every layer is answered by the
// last. The headers of every layer it went through are sent (a later
// layer's value replaces an earlier one's for the same field, as a
// middleware setting it would), so a response can carry a per-second
// limit's and a per-hour budget's headers together. A layer counts only
// what reached it: a request the first layer refused never reaches the
// second, and one the second refused was still admitted, and counted, by
// the first. Every layer reads the request's body afresh.
//
//	per := throttletest.NewTokenBucket(10, 10)
//	daily := throttletest.NewGitHub(5000, 24*time.Hour)
//	srv := throttletest.NewChain(per, daily)
//
// The Chain's own [Counter] counts end to end: admitted means admitted by
// every layer; its clock is time.Now unless Now is set. The zero Chain has
// no layer and admits everything. It is an [http.Handler], safe for
// concurrent use when its layers are; set the fields before the first
// request.
type Chain struct {
	Counter

	Layers []http.Handler // in the order a request meets them
	// Now is the clock the Chain's own Counter records by. Nil means
	// time.Now (the fake clock inside a testing/synctest bubble).
	Now func() time.Time
}

// NewChain returns a Chain of layers.
func NewChain(layers ...http.Handler) *Chain {
	return &Chain{Layers: layers}
}

// ServeHTTP passes r through the layers, as the type says.
func (c *Chain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Each layer reads the request's body afresh (an OpenAI layer reads
	// max_tokens from it wherever it stands).
	payload, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	header := make(map[string][]string)
	var last *httptest.ResponseRecorder
	ok := true
	for _, h := range c.Layers {
		r.Body = io.NopCloser(bytes.NewReader(payload))
		last = httptest.NewRecorder()
		h.ServeHTTP(last, r)
		for k, v := range last.Header() {
			header[k] = v
		}
		if last.Code/100 != 2 {
			ok = false
			break
		}
	}
	c.Counter.mu.Lock() // the Counter's own lock orders its records
	c.recordLocked(now(c.Now), r.Header.Get(WorkerHeader), ok, 1)
	c.Counter.mu.Unlock()
	if last == nil {
		admit(w)
		return
	}
	h := w.Header()
	for k, v := range header {
		h[k] = v
	}
	w.WriteHeader(last.Code)
	w.Write(last.Body.Bytes())
}
