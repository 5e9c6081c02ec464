package distributed

import (
	"context"
	"encoding/base64"
	"strconv"
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

// sleeper is one listener of a key's pushed moves: a wait sleeping until
// its ticket's turn (w set: see addTicket), or a listener signalled at
// every push of rkey (leased turns, in-flight acquisitions).
type sleeper struct {
	rkey string
	sig  chan struct{} // capacity 1: a move was pushed, or (w set) an answer came

	// A wait's ticket (w nil: none). The fields below are protected by
	// pushes.mu.
	w *keyWaiter
	t ticket
	// want: the ticket's turn may have moved since it was last learned
	// (a push that concerns it, a cut's step, a wait about to go that
	// could have missed a push): an ask is due. asking: the ask in
	// flight includes it.
	want, asking bool
	res          *turnAnswer // the last answer, not yet read
	// mark is the subscription as the turn was last learned (before the
	// reserving call, or before the last ask): every push since has been
	// seen if it was up then and has stayed up since (the same epoch).
	mark subState
}

// subState is the subscription's state as a wait saw it: whether it was
// up, and which time it had come up (see epochs); ver is pushes.ver
// before.
type subState struct {
	up    bool
	epoch uint64
	ver   uint64
}

// pushes delivers pushed moves to this process's sleeping waits of one
// Limiter. The first sleeper starts a subscription to the quota's channel;
// it ends pushLinger after the last sleeper (or at Limiter.Close), so a
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
	gen atomic.Uint64 // incremented by every message delivered (under mu)
	// ver is incremented after every change of what mark reports of the
	// subscription (cur replaced, up or down), so that unchanged needs no
	// lock while it stays.
	ver atomic.Uint64

	mu       sync.Mutex            // protects the fields below
	sleepers map[*sleeper]struct{} // sleeping waits listening
	cur      *subscription         // nil while no one sleeps or lingers
	linger   *time.Timer           // stops cur once no one has slept for pushLinger
	closed   bool                  // Close was called: no lingering
	// recent are the last messages delivered, recent[i] the one whose
	// gen is i+1 modulo pushLog (see addTicket).
	recent [pushLog]pushMsg
	asking map[string]bool // the keys whose sleepers' turns are being asked (see ask)
}

// pushLog is how many recent messages pushes keeps, so that a wait can
// tell whether the pushes that came while its reserving call was in
// flight concern its ticket.
const pushLog = 64

// pushMsg is one pushed move. The schedule script publishes "id rkey"
// when any queued turn of the key may have moved (a pause, a cut, a
// window, a retry queued ahead), and "id:qi:e rkey" when only the
// tickets behind the ticket that ended at e in queue qi moved, and only
// earlier (a refund: the cancel op, leased turns given back); id is the
// state's. Anything else before the space (inflight.lua's "0") is read
// as a move of every turn.
type pushMsg struct {
	rkey  string
	part  bool // only the tickets behind (qi, e) of state id moved
	id, e int64
	qi    int
}

func parsePush(payload string) (pushMsg, bool) {
	first, rkey, ok := strings.Cut(payload, " ")
	if !ok {
		return pushMsg{}, false
	}
	m := pushMsg{rkey: rkey}
	f := strings.Split(first, ":")
	if len(f) != 3 {
		return m, true
	}
	id, err1 := strconv.ParseInt(f[0], 10, 64)
	qi, err2 := strconv.Atoi(f[1])
	e, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 == nil && err2 == nil && err3 == nil {
		m.part, m.id, m.qi, m.e = true, id, qi, e
	}
	return m, true
}

// concerns reports whether the move m may have moved ticket t's turn.
func (m pushMsg) concerns(t ticket) bool {
	if !m.part || m.id != t.id {
		return true
	}
	// The queue of retries goes first; within a queue, by end; a class's
	// move may move any other class's ticket (schedule's classes.go).
	return t.qi > m.qi || t.qi == m.qi && t.end > m.e || t.qi != m.qi && t.qi != queueRetry
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
	return gen, p.subLocked(ver)
}

// subLocked returns the subscription's state, with ver. p.mu is held.
func (p *pushes) subLocked(ver uint64) subState {
	if p.cur == nil {
		return subState{ver: ver}
	}
	s := p.cur.state()
	s.ver = ver
	return s
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

// add registers a listener of rkey, signalled at every push of it, and
// subscribes if it is the first.
func (p *pushes) add(q *Limiter, rkey string) *sleeper {
	s := &sleeper{rkey: rkey, sig: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addLocked(q, s)
	return s
}

// addTicket registers a wait sleeping on ticket t of w's key, whose turn
// was learned by a call made after mark returned gen and sub, and
// subscribes if it is the first. An ask of its turn is due at once if a
// push since gen concerns t, or could have been missed (the
// subscription was not up then, or went down since, or the messages
// since are no longer all in recent).
func (p *pushes) addTicket(w *keyWaiter, t ticket, gen uint64, sub subState) *sleeper {
	s := &sleeper{rkey: w.rkey, sig: make(chan struct{}, 1), w: w, t: t, mark: sub}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addLocked(w.q, s)
	cur := p.subLocked(0)
	now := p.gen.Load()
	switch {
	case !sub.up || !cur.up || cur.epoch != sub.epoch || now-gen > pushLog:
		s.want = true
	default:
		for g := gen + 1; g <= now; g++ {
			if m := p.recent[(g-1)%pushLog]; m.rkey == s.rkey && m.concerns(t) {
				s.want = true
				break
			}
		}
	}
	if s.want {
		p.askLocked(s)
	}
	return s
}

func (p *pushes) addLocked(q *Limiter, s *sleeper) {
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
}

// remove unregisters s (again: nothing); the subscription ends
// pushLinger after the last sleeper, unless another comes.
func (p *pushes) remove(s *sleeper) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.sleepers[s]; !ok {
		return
	}
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

// deliver signals the listeners of the message's key, and has the turns
// of the waits whose tickets it concerns asked again (see ask).
func (p *pushes) deliver(payload string) {
	m, ok := parsePush(payload)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recent[p.gen.Load()%pushLog] = m
	p.gen.Add(1)
	for s := range p.sleepers {
		if s.rkey != m.rkey {
			continue
		}
		if s.w == nil {
			signal(s)
		} else if !s.want && m.concerns(s.t) {
			s.want = true
			p.askLocked(s)
		}
	}
}

func signal(s *sleeper) {
	select {
	case s.sig <- struct{}{}:
	default:
	}
}

// turnAnswer is what an ask learned of a ticket's turn: the turns op's
// reply for it alone (its wait, the recheck, Redis's clock, and a
// learned budget's window's reset when the key has one), or err; mark
// is the subscription before the call.
type turnAnswer struct {
	reply []int64
	err   error
	mark  subState
}

// ask has the turn of s's ticket asked again: s gets an answer (its sig
// is signalled), once the ask in flight for its key, if any, is done.
func (p *pushes) ask(s *sleeper) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.want = true
	p.askLocked(s)
}

// askLocked starts the asks of s's key unless they run; s.want is set.
// One call (op turns) asks the turns of every sleeping wait of the key
// that wants one; the waits that come to want one meanwhile are asked in
// the next call, once it returns. So a push costs a process about one
// call per key, whatever the number of its waits sleeping there. p.mu is
// held.
func (p *pushes) askLocked(s *sleeper) {
	if p.asking[s.rkey] {
		return
	}
	if p.asking == nil {
		p.asking = make(map[string]bool)
	}
	p.asking[s.rkey] = true
	w := s.w
	// The call is bounded by Timeout; Close waits for it.
	w.q.refunds.Go(func() { p.asks(w) })
}

// asks runs the asks of w's key until no sleeper of it wants one.
func (p *pushes) asks(w *keyWaiter) {
	for {
		p.mu.Lock()
		var ss []*sleeper
		for s := range p.sleepers {
			if s.w != nil && s.rkey == w.rkey && s.want {
				s.want, s.asking = false, true
				ss = append(ss, s)
			}
		}
		if len(ss) == 0 {
			delete(p.asking, w.rkey)
			p.mu.Unlock()
			return
		}
		mark := p.subLocked(0)
		p.mu.Unlock()
		answers := w.turnsOf(ss, mark)
		p.mu.Lock()
		for i, s := range ss {
			s.asking = false
			if _, ok := p.sleepers[s]; ok {
				s.res = &answers[i]
				signal(s)
			}
		}
		p.mu.Unlock()
	}
}

// answer returns s's answer not yet read, if any, and what the
// subscription was when it was asked.
func (p *pushes) answer(s *sleeper) *turnAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := s.res
	s.res = nil
	if a != nil {
		s.mark = a.mark
	}
	return a
}

// settled reports whether s's turn as last learned still holds, as far as
// this process can tell: no ask is due or in flight, no answer is unread,
// and the subscription was up when the turn was learned and has stayed
// up since, so every push since reached deliver.
func (p *pushes) settled(s *sleeper) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.want || s.asking || s.res != nil || !s.mark.up {
		return false
	}
	cur := p.subLocked(0)
	return cur.up && cur.epoch == s.mark.epoch
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
	epoch   uint64 // which time it came up (see epochs)
}

// epochs numbers the times any subscription came up, so that two
// subscriptions of one Limiter, one replacing the other, never show the
// same epoch.
var epochs atomic.Uint64

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
			s.epoch = epochs.Add(1)
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
