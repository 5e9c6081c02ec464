// Command throttle-view prints the state of a fleet's quota, as kept in
// Redis by the distributed package: every key of a quota name that has
// state now, whichever process wrote it, with what the key's State shows
// (pace and burst, tokens, what is left, the next turn, a pause, the
// units queued, a server's window).
//
// Usage:
//
//	throttle-view [-addr host:port[,host:port…]] [-prefix throttle:] [-max 1000] [-json] name
//
// -addr lists a single node, or a Cluster's nodes; the password, if
// any, comes from REDISCLI_AUTH, as for redis-cli. The keys are found
// with SCAN (100 at a time, at most -max of them; when there are more,
// the view says so, left_out ≥ 1 in JSON, without counting them). Each
// key is read with one read-only script call at the limits its state was
// written with (its first limit: the further limits a process configured
// in other units are not known here, and not shown). Nothing is written.
// -json prints the view package's JSON (a view.Page).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttle-go/throttle"
	"github.com/throttle-go/throttle/distributed"
	"github.com/throttle-go/throttle/view"
	"golang.org/x/time/rate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command with its arguments, writing to stdout and stderr;
// it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("throttle-view", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:6379", "Redis `host:port`; several, comma-separated, for a Cluster")
	prefix := fs.String("prefix", "", "the Limiter's Prefix (empty: the distributed package's default)")
	maxKeys := fs.Int("max", view.DefaultMaxKeys, "the most keys shown")
	asJSON := fs.Bool("json", false, "print JSON (the view package's Page)")
	timeout := fs.Duration("timeout", 2*time.Second, "bound on each Redis call")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: throttle-view [flags] name")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *maxKeys <= 0 {
		fs.Usage()
		return 2
	}
	name := fs.Arg(0)
	client := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 strings.Split(*addr, ","),
		Password:              os.Getenv("REDISCLI_AUTH"),
		ContextTimeoutEnabled: true,
	})
	defer client.Close()

	r := &reader{client: client, name: name, prefix: *prefix, timeout: *timeout, byConf: make(map[conf]*distributed.Limiter)}
	r.base = r.newLimiter(nil, 0)
	defer r.close()
	keys, err := r.base.StoredKeys(ctx, *maxKeys+1)
	if err != nil {
		fmt.Fprintf(stderr, "throttle-view: listing the keys of %q: %v\n", name, err)
		return 1
	}
	h := &view.Handler{Limiters: map[string]view.Source{name: fleet{keys, r}}, MaxKeys: *maxKeys}
	p := h.Page(ctx)
	if *asJSON {
		err = writeJSON(stdout, p)
	} else {
		err = writeTable(stdout, p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "throttle-view: %v\n", err)
		return 1
	}
	return 0
}

// conf is a key's first limit as its state keeps it: the configuration
// a reader's Limiter must have for the script to read the state.
type conf struct {
	rate    rate.Limit
	burst   int
	version int
}

// reader reads the state of a name's keys, each at the configuration
// its state was written with. It is used from one goroutine.
type reader struct {
	client  redis.UniversalClient
	name    string
	prefix  string
	timeout time.Duration
	base    *distributed.Limiter          // no limits: lists the keys
	byConf  map[conf]*distributed.Limiter // a Limiter per configuration met
}

// newLimiter returns a Limiter of the name with limits and version.
func (r *reader) newLimiter(limits []throttle.Limit, version int) *distributed.Limiter {
	l := distributed.New(r.client, r.name, limits...)
	l.Prefix, l.Timeout, l.Version = r.prefix, r.timeout, version
	return l
}

// limiter returns the Limiter of configuration c.
func (r *reader) limiter(c conf) *distributed.Limiter {
	if l, ok := r.byConf[c]; ok {
		return l
	}
	l := r.newLimiter([]throttle.Limit{{Rate: c.rate, Burst: c.burst}}, c.version)
	r.byConf[c] = l
	return l
}

func (r *reader) close() {
	r.base.Close()
	for _, l := range r.byConf {
		l.Close()
	}
}

// state reads key's state at the configuration it was written with. A
// Limiter of Version 0 and no limits reads first: a state of a higher
// Version has it follow that configuration, exactly as stored, and read
// again (see distributed.Limiter.Version). A state of Version 0 with
// other limits refuses it with them (a *distributed.ConfigError), and is
// read again at them (a stored interval, 1e6/rate of its writer, comes
// back exactly from the rate the error gives); an error then is the
// row's.
func (r *reader) state(ctx context.Context, key string) (throttle.State, error) {
	first := r.newLimiter(nil, 0) // its own, as it may follow a configuration
	defer first.Close()
	st, err := first.For(key).State(ctx)
	var ce *distributed.ConfigError
	if errors.As(err, &ce) {
		st, err = r.limiter(conf{ce.StoredRate, ce.StoredBurst, ce.StoredVersion}).For(key).State(ctx)
	}
	return st, err
}

// fleet is the view's Source of a name's keys in Redis.
type fleet struct {
	keys []string
	r    *reader
}

func (f fleet) All() iter.Seq2[string, throttle.Quota] {
	return func(yield func(string, throttle.Quota) bool) {
		for _, k := range f.keys {
			if !yield(k, stored{f.r.base.For(k), f.r, k}) {
				return
			}
		}
	}
}

// stored is a key's quota whose State is read at the configuration
// its state was written with.
type stored struct {
	throttle.Quota
	r   *reader
	key string
}

func (s stored) State(ctx context.Context) (throttle.State, error) { return s.r.state(ctx, s.key) }
