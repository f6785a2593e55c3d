package mta

import (
	"context"
	"slices"
	"sync"
)

// lanes queues the jobs waiting for a turn at one bounded place (a destination's signed-ahead window,
// stage.go; its connections, pool.go), each as a channel closed when its turn comes. Transactional jobs
// (bulk false) are given turns before any bulk job (a broadcast's), so that a receipt never queues behind
// the broadcast jobs the MTA already took. The owner's mutex guards it.
type lanes struct {
	urgent, bulk []chan struct{}
}

// add queues a turn in the job's lane and returns the channel closed when it comes.
func (l *lanes) add(bulk bool) chan struct{} {
	wake := make(chan struct{})
	if bulk {
		l.bulk = append(l.bulk, wake)
	} else {
		l.urgent = append(l.urgent, wake)
	}
	return wake
}

// wakeNext hands the next turn to the first urgent waiter, else to the first bulk one.
func (l *lanes) wakeNext() {
	for _, q := range []*[]chan struct{}{&l.urgent, &l.bulk} {
		if len(*q) > 0 {
			close((*q)[0])
			*q = (*q)[1:]
			return
		}
	}
}

// empty reports whether nobody waits.
func (l *lanes) empty() bool {
	return len(l.urgent) == 0 && len(l.bulk) == 0
}

// wait waits for wake (returned by l.add while mu was held; mu is no longer held) or for ctx to end. A
// waiter that gives up leaves its lane; one that was handed the turn at the same moment hands it on.
func (l *lanes) wait(ctx context.Context, mu *sync.Mutex, wake chan struct{}) error {
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	for _, q := range []*[]chan struct{}{&l.urgent, &l.bulk} {
		if i := slices.Index(*q, wake); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
			return ctx.Err()
		}
	}
	l.wakeNext()
	return ctx.Err()
}
