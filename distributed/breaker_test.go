package distributed

import (
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type step struct {
		at        time.Duration // after t0
		wantOK    bool
		wantProbe bool
		outcome   outcome // recorded when allowed
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"closed lets everything through", []step{
			{0, true, false, succeeded},
			{1, true, false, failed},
			{2, true, false, succeeded},
			{3, true, false, failed},
			{4, true, false, failed},
		}},
		{"opens after three failures, probes after the cooldown", []step{
			{0, true, false, failed},
			{1, true, false, failed},
			{2, true, false, failed},
			{3, false, false, 0},
			{breakerCooldown, false, false, 0},
			{2 + breakerCooldown, true, true, failed},
			{3 + breakerCooldown, false, false, 0},
			{2 + 2*breakerCooldown, true, true, succeeded},
			{3 + 2*breakerCooldown, true, false, succeeded},
		}},
		{"one probe at a time; an abandoned probe frees the slot", []step{
			{0, true, false, failed},
			{0, true, false, failed},
			{0, true, false, failed},
			{breakerCooldown, true, true, abandoned},
			{breakerCooldown, true, true, succeeded},
			{breakerCooldown, true, false, succeeded},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b breaker
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				ok, probe := b.allow(now)
				if ok != s.wantOK || probe != s.wantProbe {
					t.Fatalf("step %d: allow(t0+%v) = %v, %v; want %v, %v", i, s.at, ok, probe, s.wantOK, s.wantProbe)
				}
				if ok {
					b.done(now, probe, s.outcome)
				}
			}
		})
	}
}

func TestBreakerProbeInFlight(t *testing.T) {
	var b breaker
	now := time.Unix(1_700_000_000, 0)
	for range breakerThreshold {
		b.allow(now)
		b.done(now, false, failed)
	}
	later := now.Add(breakerCooldown)
	if ok, probe := b.allow(later); !ok || !probe {
		t.Fatalf("allow after cooldown = %v, %v; want the probe", ok, probe)
	}
	if ok, _ := b.allow(later); ok {
		t.Fatalf("allow while the probe is in flight = true; want false")
	}
	if c := b.done(later, true, succeeded); c != closed {
		t.Errorf("done(succeeded) after the breaker opened = %v; want closed (%v)", c, closed)
	}
}
