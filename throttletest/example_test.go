package throttletest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// A test of a client's pacing: the server admits at most 25 requests in
// any second and refuses the rest with 429 and Retry-After; the client
// under test is paced at 20 a second. The server's count says whether the
// client stayed within the limit.
func Example() {
	srv := throttletest.NewSlidingLog(25, time.Second)
	ts := httptest.NewServer(srv)
	defer ts.Close()

	client := &http.Client{Transport: &throttle.Transport{
		Base:   ts.Client().Transport,
		Waiter: &throttle.Limiter{Limits: []throttle.Limit{{Rate: 20, Burst: 1}}},
	}}
	for range 10 {
		resp, err := client.Get(ts.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}

	st := srv.Stats()
	most, _ := srv.MaxIn(time.Second)
	fmt.Printf("admitted %d, refused %d, within 25 in any second: %v\n", st.Admitted, st.Rejected, most <= 25)
	// Output: admitted 10, refused 0, within 25 in any second: true
}
