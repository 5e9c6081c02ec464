package throttle

import (
	"context"

	"github.com/throttle-go/throttle/internal/schedule"
)

// Priority is the class a wait queues in on its key. A key's first
// attempts wait in three classes, behind its retries (which go first,
// whatever their class): a wait of a higher class goes before the waits
// of lower ones queued on the same key, FIFO within a class, and no
// class starves. The classes share the key's pace in proportion to their
// weights, 16 (critical), 4 (default) and 1 (background), among those
// that have waits queued: background work gets at least 1/21 of the pace
// while everything waits, and a critical wait that finds background ones
// queued goes next. A [Limiter]'s keys and a [distributed.Limiter]'s alike
// (the fleet's processes share one queue a key, in Redis).
//
// A wait's class comes from its context ([WithPriority]): a
// [Transport]'s first attempts take their request's. A fleet that uses
// classes runs without leased turns: a distributed.Limiter stops leasing
// once it waits in a class, and its processes that never do set MaxLease
// to 1.
type Priority int

// The classes, the zero value the default.
const (
	PriorityDefault    Priority = 0
	PriorityCritical   Priority = 1
	PriorityBackground Priority = -1
)

func (p Priority) String() string {
	switch p {
	case PriorityCritical:
		return "critical"
	case PriorityBackground:
		return "background"
	}
	return "default"
}

type priorityKey struct{}

// WithPriority returns a context whose waits queue in class p: the
// [Quota] methods that wait (Wait, WaitN, Reserve, Try) and a
// [Transport]'s first attempts of a request made with it. A value other
// than the three classes is the default class.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the class ctx's waits queue in: the default
// unless [WithPriority] set one.
func PriorityFrom(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	switch p {
	case PriorityCritical, PriorityBackground:
		return p
	}
	return PriorityDefault
}

// queueOf returns the engine's queue a wait for c with ctx's class
// takes: the retries' for a retry, else its class's.
func queueOf(ctx context.Context, c Cost) int {
	if c.Retry {
		return schedule.Retry
	}
	return classQueue(ctx)
}

// classQueue returns the queue of ctx's class.
func classQueue(ctx context.Context) int { return schedule.ClassQueue(int(PriorityFrom(ctx))) }
