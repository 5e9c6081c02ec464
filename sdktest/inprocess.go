package sdktest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
)

// Fake is what the fakes of this package are: a handler that answers as
// the API does, and a round tripper that serves each request with that
// handler in the calling goroutine, with no socket. Installed as a
// client's transport (or a [throttle.Transport]'s Base), a fake lets the
// client, the throttle and the fake run inside a testing/synctest bubble,
// where every wait for a reset or a retry takes no real time and is
// measured exactly. To serve one over a real socket, start
// httptest.NewServer(fake).
//
// [throttle.Transport]: https://pkg.go.dev/github.com/throttle-go/throttle#Transport
type Fake interface {
	http.Handler
	http.RoundTripper
}

var (
	_ Fake = (*GitHub)(nil)
	_ Fake = (*OpenAI)(nil)
)

// serveInProcess serves req with h as a server at the other end of a
// connection would: h sees a request of its own (its body read from
// req's, which is closed as a RoundTripper must), and the response is
// complete when it is returned. A request whose context has ended is not
// served.
func serveInProcess(h http.Handler, req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	sr := req.Clone(req.Context())
	sr.Body = io.NopCloser(bytes.NewReader(body))
	sr.ContentLength = int64(len(body))
	sr.RequestURI = req.URL.RequestURI()
	sr.RemoteAddr = "192.0.2.1:1234"
	if sr.Host == "" {
		sr.Host = req.URL.Host
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, sr)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
