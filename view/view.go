// Package view serves a live view of a program's quotas: an
// [http.Handler] a program mounts as it would net/http/pprof, that shows
// every key its limiters know, each as its [throttle.State] has it (its
// pace and burst, what is left, the next turn, a pause and until when,
// the units queued, a server's window and declared pace, its further
// limits), and, for a fleet's limiter, whether this process is falling
// back on its FailMode. It serves HTML to a person and JSON to a machine
// (?format=json, or a request that accepts application/json).
//
//	http.Handle("/debug/throttle", &view.Handler{
//		Limiters: map[string]view.Source{"github": lim},
//		Redact:   func(key string) string { return key[:min(len(key), 6)] + "…" },
//	})
//
// # Cost and safety
//
// The view is read-only: it calls State on each key it shows and nothing
// else (a State creates no key and moves no expiry). Its cost is bounded
// by MaxKeys per limiter: a request makes at most that many State calls
// per limiter (a fleet's: one Redis call each, two with further limits),
// and says how many keys it left out. It shows no secret of its own
// making; key names are shown as Redact returns them, and an error that
// could carry a key is withheld when Redact is set. Mount it where only
// operators can reach it, as pprof.
package view

import (
	"cmp"
	"context"
	"encoding/json"
	"iter"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
)

// Source is a limiter whose keys the view lists: [*throttle.Limiter]
// (the keys it remembers) and [*distributed.Limiter] (the keys this
// process has used; its Health too) are Sources.
type Source interface {
	All() iter.Seq2[string, throttle.Quota]
}

// DefaultMaxKeys is the keys shown per limiter when [Handler].MaxKeys is
// zero.
const DefaultMaxKeys = 1000

// Handler serves the view of its Limiters. The zero Handler shows none.
// Set the fields before serving and do not change them after. A Handler
// is safe for concurrent use.
type Handler struct {
	// Limiters are the limiters shown, by name, in the order of their
	// names. Nil means none.
	Limiters map[string]Source

	// MaxKeys bounds the keys shown per limiter, and so a request's cost.
	// Zero (or less) means DefaultMaxKeys. Which keys are shown when
	// there are more is unspecified; the view says how many it left out.
	MaxKeys int

	// Redact, if not nil, returns the text shown for a key (an API key in
	// a key name, a tenant's identity); nil shows keys as they are. The
	// view then withholds the text of State's errors, which may hold the
	// key. It is called from the request's goroutine and must not block.
	Redact func(key string) string
}

// ServeHTTP serves the view of h's limiters now: JSON (a [Page]) when the
// query has format=json or the request accepts application/json, else
// HTML. It answers GET and HEAD only.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := h.Page(r.Context())
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p) // a write error: the client left
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	writeHTML(w, p) // a write error: the client left
}

// wantsJSON reports whether r asks for JSON.
func wantsJSON(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "json"
	}
	for _, a := range r.Header.Values("Accept") {
		for t := range strings.SplitSeq(a, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(t), ";")
			if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
				return true
			}
		}
	}
	return false
}

// Page returns the view of h's limiters now, as ServeHTTP serves it.
// ctx bounds the State calls of a fleet's keys.
func (h *Handler) Page(ctx context.Context) Page {
	p := Page{At: time.Now(), Limiters: []Group{}}
	for _, name := range slices.Sorted(maps.Keys(h.Limiters)) {
		p.Limiters = append(p.Limiters, h.group(ctx, name, h.Limiters[name]))
	}
	return p
}

// group returns the view of one limiter.
func (h *Handler) group(ctx context.Context, name string, s Source) Group {
	maxKeys := h.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	g := Group{Name: name, Keys: []Row{}}
	if d, ok := s.(*distributed.Limiter); ok {
		g.Store = storeOf(d.Health())
	}
	type entry struct {
		key, shown string
		q          throttle.Quota
	}
	// A Source that counts its keys (a *throttle.Limiter's Len) is not
	// walked past MaxKeys: Len counts the rest.
	counter, counts := s.(interface{ Len() int })
	var es []entry
	seen := 0
	for k, q := range s.All() {
		seen++
		if len(es) < maxKeys {
			es = append(es, entry{key: k, q: q})
		} else if counts {
			break
		}
	}
	g.LeftOut = seen - len(es)
	if counts && g.LeftOut > 0 {
		g.LeftOut = max(counter.Len()-len(es), g.LeftOut)
	}
	for i := range es {
		es[i].shown = es[i].key
		if h.Redact != nil {
			es[i].shown = h.Redact(es[i].key)
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Or(cmp.Compare(a.shown, b.shown), cmp.Compare(a.key, b.key)) })
	g.Keys = make([]Row, 0, len(es))
	for _, e := range es {
		st, err := e.q.State(ctx)
		row := rowOf(e.shown, st)
		if err != nil {
			row = Row{Key: e.shown, Error: "state unavailable (text withheld: it may hold the key)"}
			if h.Redact == nil {
				row.Error = err.Error()
			}
		}
		g.Keys = append(g.Keys, row)
	}
	return g
}
