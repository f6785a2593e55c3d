package submission

import (
	"fmt"
	"testing"
	"time"
)

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLockoutBacksOffPerAddress(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	l := newLockout(LockoutConfig{MaxFailuresPerIP: 3, MaxFailuresPerUser: -1, Lockout: time.Minute, MaxLockout: 5 * time.Minute}, c.now)
	fail := func(n int) (started bool) {
		for range n {
			started = l.failed("192.0.2.1", "user")
		}
		return started
	}
	if fail(2) || l.lockedFor("192.0.2.1", "user") != 0 {
		t.Fatal("locked out below the bound")
	}
	if !fail(1) {
		t.Fatal("the third failure did not lock the address out")
	}
	// Each lockout of the same address is twice as long as the one before, up to MaxLockout.
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute} {
		if i > 0 {
			if !fail(3) {
				t.Fatalf("lockout %d did not start", i+1)
			}
		}
		if got := l.lockedFor("192.0.2.1", "someone-else"); got != want {
			t.Errorf("lockout %d lasts %v, want %v", i+1, got, want)
		}
		if got := l.lockedFor("192.0.2.2", "user"); got != 0 {
			t.Errorf("another address is locked out for %v", got)
		}
		c.advance(want - time.Second)
		if l.lockedFor("192.0.2.1", "user") == 0 {
			t.Errorf("lockout %d ended early", i+1)
		}
		c.advance(time.Second)
		if got := l.lockedFor("192.0.2.1", "user"); got != 0 {
			t.Errorf("lockout %d still %v after its end", i+1, got)
		}
	}
	// A success of the username does not reset the address: a guesser with a credential of its own could
	// otherwise reset its count at will.
	l.succeeded("user")
	fail(2)
	if !fail(1) {
		t.Error("a success reset the address's count")
	}
	// After DefaultAuthFailureMemory without failures the address starts from zero.
	c.advance(DefaultAuthFailureMemory + 10*time.Minute)
	fail(3)
	if got := l.lockedFor("192.0.2.1", "user"); got != time.Minute {
		t.Errorf("after a quiet day the lockout lasts %v, want the first step again", got)
	}
}

func TestLockoutPerUsername(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	l := newLockout(LockoutConfig{MaxFailuresPerIP: 100, MaxFailuresPerUser: 3}, c.now)
	l.failed("192.0.2.1", "Victim")
	l.failed("192.0.2.2", "victim")
	if l.lockedFor("192.0.2.9", "victim") != 0 {
		t.Fatal("locked out below the bound")
	}
	if !l.failed("198.51.100.7", "VICTIM") {
		t.Fatal("failures from three addresses did not lock the username out (case folded)")
	}
	if got := l.lockedFor("203.0.113.1", "victim"); got != DefaultAuthLockout {
		t.Errorf("the username is locked out for %v from a fresh address, want %v", got, DefaultAuthLockout)
	}
	if got := l.lockedFor("192.0.2.1", "other"); got != 0 {
		t.Errorf("another username is locked out for %v", got)
	}
	// A success forgets the username's failures (not its lockout, which ends by itself).
	c.advance(DefaultAuthLockout)
	l.failed("192.0.2.1", "victim")
	l.failed("192.0.2.1", "victim")
	l.succeeded("victim")
	if l.failed("192.0.2.1", "victim") {
		t.Error("a success did not reset the username's count")
	}
	// Usernames no credential can have are not counted per username.
	long := fmt.Sprintf("%0200d", 7)
	for range 5 {
		if l.failed("192.0.2.50", long) {
			t.Error("an overlong username started a lockout")
		}
	}
	if len(l.users) != 1 {
		t.Errorf("%d usernames tracked", len(l.users))
	}
}

func TestLockoutTablesAreBounded(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	l := newLockout(LockoutConfig{MaxFailuresPerIP: 1, MaxFailuresPerUser: -1}, c.now)
	for i := range maxLockoutEntries + 500 {
		l.failed(fmt.Sprintf("k%d", i), "")
	}
	if n := len(l.addrs); n > maxLockoutEntries {
		t.Errorf("%d addresses tracked, bound %d", n, maxLockoutEntries)
	}
	if l.lockedFor(fmt.Sprintf("k%d", maxLockoutEntries+499), "") == 0 {
		t.Error("the newest address is not locked out")
	}
}
