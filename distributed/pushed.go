package distributed

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// pushRetry is how long a subscription that failed (Redis down, a
// failover) waits before it subscribes again.
const pushRetry = 250 * time.Millisecond

// pushChannel returns the pub/sub channel on which the schedule script
// announces moves of a key's queued turns (a pause, a cut, a window, a
// refund): prefix + "pause." + base64url(name). Every key of the quota
// shares it; the message is "id rkey".
func pushChannel(prefix, name string) string {
	if prefix == "" {
		prefix = defaultPrefix
	}
	return prefix + "pause." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// sleeper is one wait sleeping until its turn, listening for moves of its
// key's queue.
type sleeper struct {
	rkey string
	sig  chan struct{} // capacity 1: a move was pushed
}

// subState is the subscription's state as a wait saw it: whether it was
// up, and how many times it had come up; ver is pushes.ver before.
type subState struct {
	up    bool
	epoch uint64
	ver   uint64
}

// pushes delivers pushed moves to this process's sleeping waits of one
// Quota. The first sleeper starts a subscription to the quota's channel;
// it ends pushLinger after the last sleeper (or at Quota.Close), so a
// subscription outlives the waits by a second at most. While waits keep
// sleeping, or come at least once a second (the steady state of a busy
// quota), the subscription stays up and a wait costs no command beyond
// its EVALSHA.
//
// Pub/sub delivers a message only to subscribers that are up when it is
// published. A wait is sure it missed nothing when the subscription was
// up before its reservation and stayed up, and no message came between
// the reservation and the wait's listening (gen); otherwise it asks for
// its turn once more before going (see keyWaiter.sleep).
type pushes struct {
	gen atomic.Uint64 // incremented by every message delivered
	// ver is incremented after every change of what mark reports of the
	// subscription (cur replaced, up or down), so that unchanged needs no
	// lock while it stays.
	ver atomic.Uint64

	mu       sync.Mutex            // protects the fields below
	sleepers map[*sleeper]struct{} // sleeping waits listening
	cur      *subscription         // nil while no one sleeps or lingers
	linger   *time.Timer           // stops cur once no one has slept for pushLinger
	closed   bool                  // Close was called: no lingering
}

// pushLinger is how long the subscription stays up after the last
// sleeping wait ended, so that a key whose waits sleep one at a time does
// not subscribe and unsubscribe at every wait.
const pushLinger = time.Second

// mark returns the messages delivered so far and the subscription's state.
func (p *pushes) mark() (uint64, subState) {
	gen := p.gen.Load()
	ver := p.ver.Load() // before the state: a change since is seen by unchanged
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return gen, subState{ver: ver}
	}
	s := p.cur.state()
	s.ver = ver
	return gen, s
}

// unchanged reports whether nothing could have been missed since mark
// returned gen and sub. While ver is sub's, the subscription is as mark
// saw it (see ver), and no lock is taken.
func (p *pushes) unchanged(gen uint64, sub subState) bool {
	if !sub.up || p.gen.Load() != gen {
		return false
	}
	if p.ver.Load() == sub.ver {
		return true
	}
	now, s := p.mark()
	return s.up && s.epoch == sub.epoch && now == gen
}

// changed marks a change of the subscription's state, after it.
func (p *pushes) changed() {
	p.ver.Add(1)
}

// add registers a sleeper of rkey, subscribing if it is the first.
func (p *pushes) add(q *Quota, rkey string) *sleeper {
	s := &sleeper{rkey: rkey, sig: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sleepers == nil {
		p.sleepers = make(map[*sleeper]struct{})
	}
	p.sleepers[s] = struct{}{}
	if p.linger != nil {
		p.linger.Stop()
		p.linger = nil
	}
	if p.cur == nil {
		p.cur = subscribe(q.client, pushChannel(q.Prefix, q.name), p.deliver, p.changed)
		p.changed()
	}
	return s
}

// remove unregisters s; the subscription ends pushLinger after the last
// sleeper, unless another comes.
func (p *pushes) remove(s *sleeper) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sleepers, s)
	if len(p.sleepers) > 0 || p.cur == nil {
		return
	}
	if p.closed {
		go p.cur.stop() // its goroutine may be delivering, under mu
		p.cur = nil
		p.changed()
		return
	}
	cur := p.cur
	var t *time.Timer
	t = time.AfterFunc(pushLinger, func() {
		p.mu.Lock()
		if p.linger != t || p.cur != cur {
			p.mu.Unlock()
			return // a sleeper came, or Close ran
		}
		p.cur, p.linger = nil, nil
		p.changed()
		p.mu.Unlock()
		cur.stop()
	})
	p.linger = t
}

// close ends the subscription now, and any later one with its last
// sleeper.
func (p *pushes) close() {
	p.mu.Lock()
	p.closed = true
	cur := p.cur
	if len(p.sleepers) == 0 {
		p.cur = nil
		p.changed()
		if p.linger != nil {
			p.linger.Stop()
			p.linger = nil
		}
	} else {
		cur = nil
	}
	p.mu.Unlock()
	if cur != nil {
		cur.stop()
	}
}

// deliver signals the sleepers of the message's key.
func (p *pushes) deliver(payload string) {
	_, rkey, ok := strings.Cut(payload, " ")
	if !ok {
		return
	}
	p.gen.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.sleepers {
		if s.rkey != rkey {
			continue
		}
		select {
		case s.sig <- struct{}{}:
		default:
		}
	}
}

// subscription is one goroutine receiving a channel's messages until
// stop. It subscribes in the goroutine, so a Redis that is down or slow
// delays no wait: the waits just ask again before going meanwhile.
type subscription struct {
	cancel  context.CancelFunc
	done    chan struct{} // closed when the goroutine has returned
	changed func()        // called after up or down changes

	mu      sync.Mutex    // protects the fields below
	ps      *redis.PubSub // nil until subscribed
	stopped bool
	up      bool   // subscribed and receiving
	epoch   uint64 // times it came up
}

func (s *subscription) state() subState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return subState{up: s.up, epoch: s.epoch}
}

func subscribe(c redis.UniversalClient, channel string, deliver func(string), changed func()) *subscription {
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscription{cancel: cancel, done: make(chan struct{}), changed: changed}
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
		// The first reply is the subscription's confirmation: from then
		// on, every message published reaches it.
		if _, err := ps.Receive(ctx); err == nil {
			s.mu.Lock()
			s.up = true
			s.epoch++
			s.changed()
			s.mu.Unlock()
			for {
				// Close (from stop) ends a blocked receive with an error.
				msg, err := ps.ReceiveMessage(ctx)
				if err != nil {
					break
				}
				deliver(msg.Payload)
			}
		}
		s.mu.Lock()
		s.up = false
		s.changed()
		s.mu.Unlock()
		ps.Close()
		t := time.NewTimer(pushRetry)
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
