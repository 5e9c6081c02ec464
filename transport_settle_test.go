package throttle_test

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// usageBase answers every request with a body reporting used tokens, and
// the same in an X-Tokens-Used header.
func usageBase(used int) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"X-Tokens-Used": {strconv.Itoa(used)}}
		body := `{"usage":{"total_tokens":` + strconv.Itoa(used) + `}}`
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func fromHeader(resp *http.Response) (throttle.Cost, bool) {
	n, err := strconv.Atoi(resp.Header.Get("X-Tokens-Used"))
	return throttle.Cost{N: n}, err == nil
}

func cost5(*http.Request) throttle.Cost { return throttle.Cost{N: 5} }

// TestTransportSettleHook: at 10/s burst 5, requests estimated at 5 whose
// responses say 2 were used: the next request goes 200ms after, not
// 500ms; said 8, 800ms after.
func TestTransportSettleHook(t *testing.T) {
	for _, tt := range []struct {
		used int
		want time.Duration
	}{{5, 500 * time.Millisecond}, {2, 200 * time.Millisecond}, {8, 800 * time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			c := &http.Client{Transport: &throttle.Transport{
				Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}},
				Base:   usageBase(tt.used), CostOf: cost5, Usage: fromHeader,
			}}
			start := time.Now()
			for i := range 2 {
				resp, err := c.Get("http://api.example/v1")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if i == 1 && time.Since(start) != tt.want {
					t.Errorf("used %d of 5: the second request went at %v; want %v", tt.used, time.Since(start), tt.want)
				}
				if err := throttle.SettleResponse(resp, throttle.Cost{N: 1}); !errors.Is(err, throttle.ErrSettled) {
					t.Errorf("SettleResponse after the hook settled: %v; want ErrSettled", err)
				}
			}
		})
	}
}

// TestSettleResponse: a cost read from the body is settled once through
// an http.Client with a Timeout (which wraps the body), and moves the
// next request's turn exactly; a second settle is refused, a negative
// one refused without using up the settle; the caller's request keeps
// its context.
func TestSettleResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &http.Client{Timeout: time.Minute, Transport: &throttle.Transport{
			Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}},
			Base:   usageBase(2), CostOf: cost5,
		}}
		start := time.Now()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://api.example/v1/chat/completions", strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Usage struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := throttle.SettleResponse(resp, throttle.Cost{N: -1}); !errors.Is(err, throttle.ErrInvalidLimit) {
			t.Errorf("SettleResponse(-1) = %v; want ErrInvalidLimit", err)
		}
		if err := throttle.SettleResponse(resp, throttle.Cost{N: body.Usage.TotalTokens}); err != nil {
			t.Fatalf("SettleResponse(%d) = %v", body.Usage.TotalTokens, err)
		}
		if err := throttle.SettleResponse(resp, throttle.Cost{N: 1}); !errors.Is(err, throttle.ErrSettled) {
			t.Errorf("a second SettleResponse = %v; want ErrSettled", err)
		}
		if req.Context() != t.Context() {
			t.Error("the caller's request was modified: its context changed")
		}
		resp, err = c.Get("http://api.example/v1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := time.Since(start); got != 200*time.Millisecond {
			t.Errorf("after 3 of 5 units were given back, the next request went at %v; want 200ms", got)
		}
	})
}

// TestSettleResponseNoSettler: responses that did not come from a
// Transport, whose waiter cannot settle, or from a dry run are refused
// with ErrNoSettler.
func TestSettleResponseNoSettler(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://api.example/", nil)
	plain, _ := usageBase(1).RoundTrip(req)
	viaRate, err := (&throttle.Transport{Waiter: rate.NewLimiter(10, 5), Base: usageBase(1)}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := (&throttle.Transport{Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 10, Burst: 5}}}, Base: usageBase(1), DryRun: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	for name, resp := range map[string]*http.Response{"nil": nil, "plain": plain, "rate.Limiter": viaRate, "dry run": dry, "no request": {}} {
		if err := throttle.SettleResponse(resp, throttle.Cost{N: 1}); !errors.Is(err, throttle.ErrNoSettler) {
			t.Errorf("%s: SettleResponse = %v; want ErrNoSettler", name, err)
		}
	}
}

// TestTransportSettleRetried: a 429's response is settled by the hook as
// its attempt, and the final response as its own. At 2/s burst 5, the
// first attempt empties the bucket and gets a 429 with Retry-After 1 and
// 0 used: its 5 units back, the retry goes at the pause's end, 1 s (not
// at 2.5 s), and its 3 used of 5 leave the bucket 2.
func TestTransportSettleRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		base := roundTrip(func(r *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				h := http.Header{"Retry-After": {"1"}, "X-Tokens-Used": {"0"}}
				return &http.Response{StatusCode: 429, Header: h, Body: http.NoBody, Request: r}, nil
			}
			return usageBase(3).RoundTrip(r)
		})
		lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 2, Burst: 5}}}
		c := &http.Client{Transport: &throttle.Transport{Waiter: lim, Base: base, CostOf: cost5, Usage: fromHeader}}
		start := time.Now()
		resp, err := c.Get("http://api.example/v1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := time.Since(start); calls != 2 || got != time.Second {
			t.Errorf("%d attempts, done at %v; want 2, at 1s (the 429's units given back)", calls, got)
		}
		// Within 1e-9: the 429 trimmed the pace, and the bucket's units
		// were kept across the change in floats.
		if st := keyState(lim, "api.example"); math.Abs(st.Tokens-2) > 1e-9 {
			t.Errorf("after the retry settled as 3 of 5: the bucket holds %v; want 2", st.Tokens)
		}
	})
}

// TestTransportSettleUnits: a Transport's attempts wait for 1,000 tokens
// each on a tokens bucket of 1,000 a second, 1,000 at once; each response
// says in X-Used what it used, settled by Usage (or, from the body,
// SettleResponse): used 500, the next request goes after 500 ms, not
// 1 s; used 1,500, after 1.5 s. A response is settled once.
func TestTransportSettleUnits(t *testing.T) {
	for _, tt := range []struct {
		name string
		used int
		hook bool // Usage; else SettleResponse
		want time.Duration
	}{
		{"hook give-back", 500, true, 500 * time.Millisecond},
		{"hook charge", 1500, true, 1500 * time.Millisecond},
		{"response give-back", 500, false, 500 * time.Millisecond},
		{"response charge", 1500, false, 1500 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("X-Used", strconv.Itoa(tt.used))
				})
				tr := &throttle.Transport{
					Base: &throttletest.Direct{Handler: srv},
					Waiter: &throttle.Limiter{
						Limits: []throttle.Limit{{Unit: "tokens", Rate: 1000, Burst: 1000}},
					},
					CostOf: func(*http.Request) throttle.Cost { return throttle.Cost{N: 1, Units: map[string]int{"tokens": 1000}} },
				}
				used := func(resp *http.Response) throttle.Cost {
					n, _ := strconv.Atoi(resp.Header.Get("X-Used"))
					return throttle.Cost{N: 1, Units: map[string]int{"tokens": n}}
				}
				if tt.hook {
					tr.Usage = func(resp *http.Response) (throttle.Cost, bool) { return used(resp), true }
				}
				client := &http.Client{Transport: tr}
				resp, err := client.Get("http://llm.example/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				err = throttle.SettleResponse(resp, used(resp))
				if tt.hook && !errors.Is(err, throttle.ErrSettled) || !tt.hook && err != nil {
					t.Errorf("SettleResponse = %v; want %v", err, map[bool]error{true: throttle.ErrSettled}[tt.hook])
				}
				start := time.Now()
				resp, err = client.Get("http://llm.example/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := time.Since(start); got != tt.want {
					t.Errorf("used %d: the second request went after %v; want %v", tt.used, got, tt.want)
				}
			})
		})
	}
}
