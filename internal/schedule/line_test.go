package schedule

import "testing"

// TestLineReleaseWholeTickets: a release that reaches past one ticket of
// several units into the next lets the first go whole and none of the
// second (found by the property suite: the second went in part, a later
// cancel of it made a hole over the head, and a wait behind it spun).
func TestLineReleaseWholeTickets(t *testing.T) {
	var q line
	q.take(2) // (0,2]
	q.take(2) // (2,4]
	q.take(1) // (4,5]
	if got := q.release(3); got != 2 || q.rel != 2 {
		t.Fatalf("release(3) of tickets of 2, 2, 1 = %d, rel %d; want 2, rel 2", got, q.rel)
	}
	q.cancel(4, 2)
	if p := q.ahead(5); p != 1 {
		t.Errorf("after cancelling (2,4], the ticket (4,5] has %d units ahead, its own included; want 1", p)
	}
	if got := q.release(1); got != 1 || q.rel != 5 {
		t.Errorf("release(1) = %d, rel %d; want 1, rel 5", got, q.rel)
	}
}

// TestWindowSameWindowTold: the same window told again with fewer units
// left than are in flight takes the server's count as told (found by the
// property suite: Remaining 0 was read as the units in flight).
func TestWindowSameWindowTold(t *testing.T) {
	const sec = 1e9
	var w window
	w.update(0, 7, 3*sec, 0, 0, 5, sec) // 7 left, 5 in flight: 2 for us
	if w.left != 2 {
		t.Fatalf("left = %v; want 2", w.left)
	}
	w.update(sec, 0, 2*sec, 0, 0, 5, sec) // the same reset: none left
	if w.left != 0 {
		t.Errorf("the same window told with 0 remaining, 5 in flight: left = %v; want 0", w.left)
	}
}
