package mta

import (
	"context"
	"runtime"
	"sync"
)

// signStage lets at most Config.Signers jobs sign at once and, while the process serves requests
// (Config.Foreground), runs their signatures on threads of their own at a lower scheduling priority
// (Config.SigningNice).
//
// A signature is the largest single cost of a delivery (an RSA-2048 private-key operation is about a
// millisecond of CPU), and when delivery keeps the cores busy every other goroutine of the process waits
// behind the signing ones: an API request's goroutine, readied by the network, queued behind dozens of
// jobs that each signed before they blocked again. With the stage, at most Signers jobs sign at once and
// the others wait, blocked rather than runnable; the process runs with Signers more processors than
// GOMAXPROCS would otherwise be (deploy/app), so the rest of the process keeps its own. While the process is
// busy answering requests (Foreground: in an all-in-one process, more HTTP requests in flight than there
// are cores), signatures go to the stage's niced threads, and the kernel, which shares the cores between
// threads by their nice value, runs the threads answering the requests first. Otherwise a job signs on its
// own goroutine once it holds one of the Signers turns, at the process's priority, so that delivery beside
// a trickle of requests (a broadcast with transactional mail going on) keeps its full share: niced signing
// there gave the background loops the CPU first, which then worked in smaller batches, and cost a
// broadcast 12-16% of its rate (docs/benchmarks.md). Only the niced signatures are handed to threads: a
// hand-over to a locked thread and back costs two thread wake-ups and a processor hand-over per signature.
// The niced threads are a set of their own because a thread's nice value cannot be lowered again without
// privilege.
//
// Jobs waiting for their turn to sign wait in lanes: a transactional job signs before every bulk job (a
// broadcast's) that waits. The signed-ahead window (stage.go) lets jobs in before they sign, so during a
// broadcast it is mostly full of broadcast jobs waiting here, and a receipt let in ahead of them would
// otherwise still sign after all of them.
type signStage struct {
	mu      sync.Mutex
	free    int // turns to sign that nobody holds
	waiting lanes

	low        chan signJob
	foreground func() bool
}

type signJob struct {
	run  func()
	done chan any // the recovered panic value, or nil
}

// newSignStage allows n signatures at once and, when nice is above 0, foreground is set and threads have
// priorities of their own (Linux), starts n threads at that nice value (lowerPriority).
func newSignStage(n, nice int, foreground func() bool) *signStage {
	s := &signStage{free: n}
	if nice > 0 && foreground != nil && threadPriorities {
		s.low, s.foreground = make(chan signJob), foreground
		for range n {
			go serveSigning(s.low, nice)
		}
	}
	return s
}

// serveSigning runs jobs until the channel is closed. The goroutine keeps its thread to itself and never
// unlocks it: when the goroutine ends, the runtime ends the thread with it, so a lowered priority never
// reaches another goroutine. (Threads the runtime starts on behalf of a locked one are started by a
// thread of its own, so they do not inherit the priority either.)
func serveSigning(jobs <-chan signJob, nice int) {
	runtime.LockOSThread()
	lowerPriority(nice)
	for j := range jobs {
		j.done <- runJob(j.run)
	}
}

func runJob(run func()) (panicked any) {
	defer func() { panicked = recover() }()
	run()
	return nil
}

// do runs f once it is the job's turn to sign (fewer than Signers others are signing; bulk false puts the
// job ahead of every bulk job waiting), on one of the stage's niced threads while the process is in the
// foreground and otherwise on the caller, and returns when f has returned; a panic in f reaches the
// caller, whose own recovery (handle's) then deals with it. It returns ctx's error, without running f,
// when ctx ends first. With no stage, f runs on the caller at once.
func (s *signStage) do(ctx context.Context, bulk bool, f func()) error {
	if s == nil {
		f()
		return nil
	}
	if err := s.take(ctx, bulk); err != nil {
		return err
	}
	defer s.give()
	if s.low != nil && s.foreground() {
		done := make(chan any, 1)
		s.low <- signJob{run: f, done: done}
		if p := <-done; p != nil {
			panic(p)
		}
		return nil
	}
	f()
	return nil
}

// take waits for a turn to sign in the job's lane.
func (s *signStage) take(ctx context.Context, bulk bool) error {
	for {
		s.mu.Lock()
		if s.free > 0 {
			s.free--
			s.mu.Unlock()
			return nil
		}
		wake := s.waiting.add(bulk)
		s.mu.Unlock()
		if err := s.waiting.wait(ctx, &s.mu, wake); err != nil {
			return err
		}
	}
}

// give hands a turn back and wakes the next waiter.
func (s *signStage) give() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free++
	s.waiting.wakeNext()
}

// close ends the signing threads once the jobs given to them are done; do must not be called after.
func (s *signStage) close() {
	if s == nil {
		return
	}
	if s.low != nil {
		close(s.low)
	}
}
