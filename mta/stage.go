package mta

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/postmill/postmill/ports"
)

// stages holds what bounds the MTA's pipeline besides the worker slots (Config.Workers, each a job being
// loaded, built and signed, or in its SMTP transaction):
//
//   - the signed-ahead window of each destination (Config.Window): how many jobs at most hold a built and
//     signed message for one destination host, sending or waiting for one of its connections. A slow
//     receiver thus never has more messages signed for it than it can take soon, and its backlog does not
//     spend the CPU that other destinations' messages need;
//   - the settling stage: a job whose SMTP transaction is over leaves its worker slot at once, and its
//     journal entry, report and ack happen behind, at most Config.Workers jobs at a time; when that many
//     are settling, a worker waits before handing over another (the pipeline slows to what the core and
//     the queue can record).
type stages struct {
	window int

	mu      sync.Mutex
	windows map[string]*destWindow

	settleSlots chan struct{}
	settling    sync.WaitGroup
}

type destWindow struct {
	used int
	// waiting are the jobs waiting for a place, transactional ones first (lanes).
	waiting lanes
}

func newStages(cfg Config) *stages {
	return &stages{window: cfg.Window, windows: map[string]*destWindow{}, settleSlots: make(chan struct{}, cfg.Workers)}
}

// enterWindow takes a place in key's signed-ahead window for a transactional job (enterWindowAs).
func (s *stages) enterWindow(ctx context.Context, key string) (release func(), err error) {
	return s.enterWindowAs(ctx, key, false)
}

// enterWindowAs takes a place in key's signed-ahead window, waiting while it is full, and returns the
// function that gives it back. While it waits, a transactional job (bulk false) is ahead of every bulk job.
func (s *stages) enterWindowAs(ctx context.Context, key string, bulk bool) (release func(), err error) {
	for {
		s.mu.Lock()
		w := s.windows[key]
		if w == nil {
			w = &destWindow{}
			s.windows[key] = w
		}
		if w.used < s.window {
			w.used++
			s.mu.Unlock()
			return func() { s.leaveWindow(key) }, nil
		}
		wake := w.waiting.add(bulk)
		s.mu.Unlock()
		if err := w.waiting.wait(ctx, &s.mu, wake); err != nil {
			return nil, err
		}
	}
}

func (s *stages) leaveWindow(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.windows[key]
	w.used--
	w.waiting.wakeNext()
	if w.used == 0 && w.waiting.empty() {
		delete(s.windows, key)
	}
}

// settleBehind runs settle (journal, report, ack) on the settling stage, waiting for a place in it first.
// A panic in settle hands the job back to the queue, as one in handle does.
func (m *MTA) settleBehind(ctx context.Context, d ports.Delivery, log *slog.Logger, settle func()) {
	m.stages.settleSlots <- struct{}{}
	m.stages.settling.Go(func() {
		defer func() { <-m.stages.settleSlots }()
		defer func() {
			if p := recover(); p != nil {
				log.Error("settling the delivery panicked", "panic", p)
				m.retryLater(ctx, d, log, fmt.Sprintf("settling the job panicked: %v", p))
			}
		}()
		settle()
	})
}

// settle journals a handed-over job's outcome, reports it and acks the job (report).
func (m *MTA) settle(ctx context.Context, d ports.Delivery, log *slog.Logger, report ports.DeliveryReport) {
	if handedOver(report) {
		evicted, err := m.journal.record(report)
		if err != nil {
			// The report goes ahead: only a failure of both could send the message twice.
			log.Error("journal write failed; a redelivery of this job would send it again", "error", err)
		}
		if evicted != "" {
			log.Warn("journal full; forgot the oldest handed-over job", "evicted_job", evicted)
		}
	}
	m.report(ctx, d, log, report)
}
