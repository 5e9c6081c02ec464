package throttletest_test

import (
	"strconv"
	"testing"

	"github.com/throttle-go/throttle/throttletest"
)

// FuzzOpenAI feeds the OpenAI server arbitrary request bodies: it never
// panics, charges no negative cost, and never reports a negative
// remaining count.
func FuzzOpenAI(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt","max_tokens":200}`,
		`{"max_completion_tokens":50,"max_tokens":20}`,
		`{"max_tokens":-5}`,
		`{"max_tokens":9223372036854775807}`,
		`{"max_tokens":1e30}`,
		`{"max_tokens":"200"}`,
		`not json`,
		``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		s := throttletest.NewOpenAI(60, 6000)
		s.PromptTokens = 2
		for range 3 {
			a := send(t, s, body)
			if a.status != 200 && a.status != 429 {
				t.Fatalf("status %d; want 200 or 429", a.status)
			}
			for _, k := range []string{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Remaining-Tokens"} {
				if n, err := strconv.ParseInt(a.header.Get(k), 10, 64); err != nil || n < 0 {
					t.Fatalf("%s: %q; want a count ≥ 0", k, a.header.Get(k))
				}
			}
		}
		if st := s.Stats(); st.Units < 0 {
			t.Fatalf("units admitted %d; want ≥ 0", st.Units)
		}
	})
}
