package view_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/view"
)

// A program mounts the view beside its handlers, as it would
// net/http/pprof; a person opens it in a browser, a machine asks for
// JSON.
func Example() {
	lim := &throttle.Limiter{Limits: []throttle.Limit{{Rate: 1, Burst: 5}}}
	ctx := context.Background()
	lim.For("api.github.com").Wait(ctx)
	lim.For("tenant:sk-live-1234").WaitN(ctx, 3)
	lim.For("api.openai.com").Pause(ctx, 60e9)

	mux := http.NewServeMux()
	mux.Handle("/debug/throttle", &view.Handler{
		Limiters: map[string]view.Source{"apis": lim},
		Redact:   func(key string) string { tenant, _, _ := strings.Cut(key, ":sk-"); return tenant },
	})

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/throttle?format=json", nil))
	var p view.Page
	json.Unmarshal(rec.Body.Bytes(), &p)
	for _, k := range p.Limiters[0].Keys {
		fmt.Printf("%s: %.0f of %.0f left, paused %t\n", k.Key, *k.Tokens, k.Burst, k.PausedUntil != nil)
	}
	// Output:
	// api.github.com: 4 of 5 left, paused false
	// api.openai.com: 0 of 5 left, paused true
	// tenant: 2 of 5 left, paused false
}
