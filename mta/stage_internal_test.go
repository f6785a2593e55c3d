package mta

import (
	"context"
	"testing"
	"time"
)

// TestSignedAheadWindow: a destination's window admits Window jobs; the next waits until one leaves, and a
// waiter whose context ends gives up without taking a place; other destinations are not affected.
func TestSignedAheadWindow(t *testing.T) {
	t.Parallel()
	s := newStages(Config{Window: 2, Workers: 4})
	ctx := context.Background()
	a1, err := s.enterWindow(ctx, "mx.a:25")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.enterWindow(ctx, "mx.a:25"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.enterWindow(ctx, "mx.b:25"); err != nil {
		t.Fatalf("another destination waits for mx.a's window: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.enterWindow(short, "mx.a:25"); err == nil {
		t.Fatal("a third job entered a window of two")
	}
	entered := make(chan struct{})
	go func() {
		if _, err := s.enterWindow(ctx, "mx.a:25"); err == nil {
			close(entered)
		}
	}()
	select {
	case <-entered:
		t.Fatal("entered a full window")
	case <-time.After(20 * time.Millisecond):
	}
	a1()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("a place given back did not admit the waiting job")
	}
}
