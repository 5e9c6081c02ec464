package throttle_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/throttletest"
)

// MaxWait fails a request at once when its turn for quota is further away,
// with the wait it would have had: here GitHub's hourly window is spent
// and resets in 50 minutes. The 403 saying so is returned at once (its
// reset is past MaxRetryAfter); the next request is not sent at all.
func ExampleTransport_maxWait() {
	api := throttletest.NewGitHub(5000, time.Hour)
	api.Used, api.ResetIn = 5000, 50*time.Minute // spent by other programs
	client := &http.Client{Transport: &throttle.Transport{
		Base:    &throttletest.Direct{Handler: api}, // in-process; a real client leaves Base nil
		MaxWait: time.Minute,
	}}

	resp, err := client.Get("https://api.github.com/user")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)

	_, err = client.Get("https://api.github.com/user")
	var de *throttle.DeadlineError
	if errors.As(err, &de) {
		fmt.Println("quota frees up in", de.Delay.Round(time.Minute))
	}
	fmt.Println("requests the server saw:", api.Stats().Arrivals)
	// Output:
	// 403
	// quota frees up in 50m0s
	// requests the server saw: 1
}
