package distributed

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// minPushedSleep is the shortest sleep that listens for pushed pauses. A
// shorter one would cost a SUBSCRIBE and an UNSUBSCRIBE whenever it is the
// only sleeper, for a pause that could reach it only a round trip or two
// before its turn anyway; its turn goes as reserved.
const minPushedSleep = 10 * time.Millisecond

// pauseRetry is how long a subscription that failed (Redis down, a
// failover) waits before it subscribes again.
const pauseRetry = 250 * time.Millisecond

// pauseChannel returns the pub/sub channel on which pause.lua and
// adapt.lua announce the quota's pauses: prefix + "pause." +
// base64url(name). Every key of the quota shares it; the message names
// the key.
func pauseChannel(prefix, name string) string {
	if prefix == "" {
		prefix = defaultPrefix
	}
	return prefix + "pause." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// pushedPause is one announced pause, in µs of Redis's clock: written at
// now, it holds the key off from start (now, or the end of the pause it
// extends) until end, and every turn reserved before now at or after
// start moves back by end-start (the scripts moved the queue likewise).
type pushedPause struct {
	now, start, end int64
	rkey            string
}

// parsePause reads "now start end rkey" as the scripts publish it.
func parsePause(s string) (pushedPause, bool) {
	f := strings.SplitN(s, " ", 4)
	if len(f) != 4 {
		return pushedPause{}, false
	}
	var p pushedPause
	var err [3]error
	p.now, err[0] = strconv.ParseInt(f[0], 10, 64)
	p.start, err[1] = strconv.ParseInt(f[1], 10, 64)
	p.end, err[2] = strconv.ParseInt(f[2], 10, 64)
	p.rkey = f[3]
	return p, err[0] == nil && err[1] == nil && err[2] == nil && p.end > p.start
}

// sleeper is one wait sleeping until its turn, listening for pauses of
// its key.
type sleeper struct {
	rkey    string
	sig     chan struct{} // capacity 1: pending has something
	pending []pushedPause // protected by pauses.mu
}

// pauses delivers pushed pauses to this process's sleeping waits of one
// Quota. The first sleeper starts a subscription to the quota's channel;
// the last one to stop ends it and waits for its goroutine, so no
// goroutine outlives the waits and the Quota needs no Close. While waits
// keep sleeping (the steady state of a busy quota) the subscription stays
// up and a wait costs no command beyond its EVALSHA.
type pauses struct {
	mu       sync.Mutex            // protects sleepers, cur and every sleeper's pending
	sleepers map[*sleeper]struct{} // sleeping waits listening
	cur      *subscription         // nil while no one sleeps
}

// add registers a sleeper of rkey, subscribing if it is the first.
func (p *pauses) add(q *Quota, rkey string) *sleeper {
	s := &sleeper{rkey: rkey, sig: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sleepers == nil {
		p.sleepers = make(map[*sleeper]struct{})
	}
	p.sleepers[s] = struct{}{}
	if p.cur == nil {
		p.cur = subscribe(q.client, pauseChannel(q.Prefix, q.name), p.deliver)
	}
	return s
}

// remove unregisters s; the last sleeper ends the subscription.
func (p *pauses) remove(s *sleeper) {
	p.mu.Lock()
	delete(p.sleepers, s)
	var stop *subscription
	if len(p.sleepers) == 0 {
		stop, p.cur = p.cur, nil
	}
	p.mu.Unlock()
	if stop != nil {
		stop.stop() // outside mu: its goroutine may be delivering
	}
}

// take returns and clears what was delivered to s.
func (p *pauses) take(s *sleeper) []pushedPause {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := s.pending
	s.pending = nil
	return got
}

// deliver hands a message to the sleepers of its key.
func (p *pauses) deliver(payload string) {
	pp, ok := parsePause(payload)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.sleepers {
		if s.rkey != pp.rkey {
			continue
		}
		s.pending = append(s.pending, pp)
		select {
		case s.sig <- struct{}{}:
		default:
		}
	}
}

// subscription is one goroutine receiving a channel's messages until
// stop. It subscribes in the goroutine, so a Redis that is down or slow
// delays no wait: the waits just get no pushed pauses meanwhile.
type subscription struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned

	mu      sync.Mutex    // protects ps and stopped
	ps      *redis.PubSub // nil until subscribed
	stopped bool
}

func subscribe(c redis.UniversalClient, channel string, deliver func(string)) *subscription {
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscription{cancel: cancel, done: make(chan struct{})}
	go s.run(ctx, c, channel, deliver)
	return s
}

func (s *subscription) run(ctx context.Context, c redis.UniversalClient, channel string, deliver func(string)) {
	defer close(s.done)
	for ctx.Err() == nil {
		ps := c.Subscribe(ctx, channel)
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			ps.Close()
			return
		}
		s.ps = ps
		s.mu.Unlock()
		for {
			// Close (from stop) ends a blocked receive with an error.
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				break
			}
			deliver(msg.Payload)
		}
		ps.Close()
		t := time.NewTimer(pauseRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// stop ends the subscription and waits for its goroutine.
func (s *subscription) stop() {
	s.cancel()
	s.mu.Lock()
	s.stopped = true
	if s.ps != nil {
		s.ps.Close()
	}
	s.mu.Unlock()
	<-s.done
}
