package mta

import (
	"context"
	"testing"
	"time"
)

// TestTransactionalFirst: when every place of a destination's signed-ahead window, every turn to sign or
// every connection to a destination is taken, a transactional job that starts waiting after bulk jobs
// still gets the next turn, and the bulk jobs follow in their order; a waiter that gives up leaves its
// lane without taking a turn from the others.
func TestTransactionalFirst(t *testing.T) {
	t.Parallel()
	const key = "mx.a:25"
	// Each place: take a turn (waiting while there is none) and the function that gives it back; the
	// waiters' lanes under the place's lock.
	type place struct {
		take    func(ctx context.Context, bulk bool) (func(), error)
		waiting func() (bulk, urgent int)
	}
	places := map[string]func() place{
		"window": func() place {
			s := newStages(Config{Window: 1, Workers: 4})
			return place{
				take: func(ctx context.Context, bulk bool) (func(), error) { return s.enterWindowAs(ctx, key, bulk) },
				waiting: func() (int, int) {
					s.mu.Lock()
					defer s.mu.Unlock()
					w := s.windows[key]
					return len(w.waiting.bulk), len(w.waiting.urgent)
				},
			}
		},
		"signing": func() place {
			s := newSignStage(1, 0, nil)
			return place{
				take: func(ctx context.Context, bulk bool) (func(), error) {
					if err := s.take(ctx, bulk); err != nil {
						return nil, err
					}
					return s.give, nil
				},
				waiting: func() (int, int) {
					s.mu.Lock()
					defer s.mu.Unlock()
					return len(s.waiting.bulk), len(s.waiting.urgent)
				},
			}
		},
		"connections": func() place {
			p := newPool(1, time.Minute, func(*session) {})
			dial := func(context.Context) (*session, error) { return &session{}, nil }
			return place{
				take: func(ctx context.Context, bulk bool) (func(), error) {
					s, err := p.get(ctx, key, 0, bulk, dial)
					if err != nil {
						return nil, err
					}
					return func() { p.put(s, 0) }, nil
				},
				waiting: func() (int, int) {
					p.mu.Lock()
					defer p.mu.Unlock()
					d := p.dests[key]
					return len(d.waiting.bulk), len(d.waiting.urgent)
				},
			}
		},
	}
	for name, newPlace := range places {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pl := newPlace()
			ctx := context.Background()
			leave, err := pl.take(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			awaits := func(bulk, urgent int) {
				t.Helper()
				for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
					if b, u := pl.waiting(); b == bulk && u == urgent {
						return
					}
				}
				t.Fatalf("waiters never reached %d bulk and %d transactional", bulk, urgent)
			}
			order := make(chan string, 4)
			take := func(ctx context.Context, name string, bulk bool) {
				go func() {
					give, err := pl.take(ctx, bulk)
					if err != nil {
						order <- name + ": " + err.Error()
						return
					}
					order <- name
					give()
				}()
			}
			take(ctx, "bulk 1", true)
			awaits(1, 0)
			gone, giveUp := context.WithCancel(ctx)
			take(gone, "gone", false)
			awaits(1, 1)
			giveUp()
			if got := <-order; got != "gone: context canceled" {
				t.Fatalf("the waiter that gave up: %q", got)
			}
			awaits(1, 0)
			take(ctx, "bulk 2", true)
			awaits(2, 0)
			take(ctx, "receipt", false)
			awaits(2, 1)
			leave()
			for _, want := range []string{"receipt", "bulk 1", "bulk 2"} {
				select {
				case got := <-order:
					if got != want {
						t.Fatalf("got %q, want %q next", got, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s never had its turn", want)
				}
			}
		})
	}
}
