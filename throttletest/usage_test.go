package throttletest_test

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttle-go/throttle/throttletest"
)

// TestUsage: the bucket is charged the estimate at admission and the
// tokens used when the completion is done; usage reports them; a refusal
// says when the estimate fits.
func TestUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := throttletest.NewUsage(600, 100) // 10 tokens a second, 100 at once
		s.Gen = time.Second
		s.Used = func(est int) int { return est / 4 }
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() {
			a, err := trySend(s, `{"max_tokens":80}`)
			if err != nil || a.status != 200 || !strings.Contains(a.body, `"total_tokens":20`) || time.Since(start) != time.Second {
				t.Errorf("80 estimated, 20 used: %d %q at %v (%v); want 200 with total_tokens 20 at 1s", a.status, a.body, time.Since(start), err)
			}
		})
		synctest.Wait()
		// 20 left while the completion runs: 30 asked waits 1 s.
		if a := send(t, s, `{"max_tokens":30}`); a.status != 429 || a.header.Get("Retry-After-Ms") != "1000" {
			t.Errorf("30 with 20 left: %d, Retry-After-Ms %q; want 429, 1000", a.status, a.header.Get("Retry-After-Ms"))
		}
		wg.Wait()
		// At 1 s: 20 + 10 refilled + 60 given back (80 estimated, 20 used).
		if a := send(t, s, `{"max_tokens":90}`); a.status != 200 {
			t.Errorf("90 with 90 held: %d; want 200", a.status)
		}
		if st := s.Stats(); st.Admitted != 2 || st.Rejected != 1 || st.Units != 20+22 {
			t.Errorf("Stats() = %+v; want 2 admitted, 1 rejected, 42 tokens used", st)
		}
		if a := send(t, s, `{"max_tokens":101}`); a.status != 429 || a.header.Get("Retry-After") != "" {
			t.Errorf("101 over a burst of 100: %d, Retry-After %q; want 429 without one", a.status, a.header.Get("Retry-After"))
		}
	})
}
