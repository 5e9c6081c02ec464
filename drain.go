package throttle

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// drainBytes is the most of an abandoned response's body read before
	// a retry, so that its connection can be reused: error bodies are
	// small, and reading a large one costs more than a new connection.
	drainBytes = 4 << 10
	// drainTime is the longest the read may take: a body that stalls
	// must not hold RoundTrip.
	drainTime = 500 * time.Millisecond
)

// errBodyDiscarded is what the body of a kept response returns after its
// first drainBytes, when the rest was discarded (or never came) before a
// retry that was then given up.
var errBodyDiscarded = errors.New("throttle: rest of the response body discarded before a retry")

// keep reads what is left of the body of a response about to be retried,
// at most drainBytes and for at most drainTime (or until ctx ends), and
// closes it, so that its connection is released for reuse while the
// retry waits. It returns resp with a body that replays what was read:
// if the retry is given up before it is sent, resp is returned as it was
// received, unless its body was longer than drainBytes or stalled, when
// the body ends with errBodyDiscarded after what was read.
//
// A body that stalls is closed when the time is up, which ends the read:
// net/http's response bodies unblock a Read on Close.
func keep(ctx context.Context, resp *http.Response) *http.Response {
	keepRead(ctx, resp)
	return resp
}

// keepRead is keep, and returns what it read of the body (at most
// drainBytes).
func keepRead(ctx context.Context, resp *http.Response) []byte {
	body := resp.Body
	var once sync.Once
	var cut atomic.Bool // the read was cut short by time or ctx
	closeBody := func() { once.Do(func() { body.Close() }) }
	stop := func() { cut.Store(true); closeBody() }
	timer := time.AfterFunc(drainTime, stop)
	unhook := context.AfterFunc(ctx, stop)
	b, err := io.ReadAll(io.LimitReader(body, drainBytes+1))
	timer.Stop()
	unhook()
	closeBody()
	var kept io.Reader
	switch {
	case cut.Load():
		kept = io.MultiReader(bytes.NewReader(b), errReader{errBodyDiscarded})
	case err != nil:
		kept = io.MultiReader(bytes.NewReader(b), errReader{err})
	case len(b) > drainBytes:
		kept = io.MultiReader(bytes.NewReader(b[:drainBytes]), errReader{errBodyDiscarded})
	default:
		kept = bytes.NewReader(b)
	}
	resp.Body = io.NopCloser(kept)
	return b[:min(len(b), drainBytes)]
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// closeResponse closes resp's body, if any.
func closeResponse(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}
