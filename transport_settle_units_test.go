package throttle_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// TestTransportSettleUnits: a Transport's attempts wait for 1,000 tokens
// each on a tokens bucket of 1,000 a second, 1,000 at once; each response
// says in X-Used what it used, settled by SettleUnits (or, from the body,
// SettleResponseUnits): used 500, the next request goes after 500 ms, not
// 1 s; used 1,500, after 1.5 s. A response is settled once.
func TestTransportSettleUnits(t *testing.T) {
	for _, tt := range []struct {
		name string
		used int
		hook bool // SettleUnits; else SettleResponseUnits
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
					Waiter: &throttle.Limiter{Limits: []throttle.UnitLimit{
						{Unit: "tokens", Rate: throttle.Rate{Limit: 1000, Burst: 1000}},
					}},
					Units: func(*http.Request) []throttle.UnitCost { return []throttle.UnitCost{{Unit: "tokens", N: 1000}} },
				}
				used := func(resp *http.Response) []throttle.UnitCost {
					n, _ := strconv.Atoi(resp.Header.Get("X-Used"))
					return []throttle.UnitCost{{Unit: "tokens", N: n}}
				}
				if tt.hook {
					tr.SettleUnits = func(resp *http.Response) ([]throttle.UnitCost, bool) { return used(resp), true }
				}
				client := &http.Client{Transport: tr}
				resp, err := client.Get("http://llm.example/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				err = throttle.SettleResponseUnits(resp, used(resp))
				if tt.hook && !errors.Is(err, throttle.ErrSettled) || !tt.hook && err != nil {
					t.Errorf("SettleResponseUnits = %v; want %v", err, map[bool]error{true: throttle.ErrSettled}[tt.hook])
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
