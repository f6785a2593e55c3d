package mta

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/emersion/go-smtp"
)

// session is one open SMTP connection, greeted (and, when offered, under TLS and authenticated).
type session struct {
	client *smtp.Client
	conn   net.Conn // the connection the client reads and writes (TLS or plain), for write deadlines
	key    string   // pool key
	remote string   // host[ip]:port, for replies and logs
	tls    bool
	// downgrade says why a session that should have been under TLS is not (a refused STARTTLS or a failed
	// handshake followed by plaintext); "" otherwise.
	downgrade string
	uses      int // transactions started on it
	// idleFor is how long the session may stay idle before the reaper closes it (its site's idle
	// timeout); 0: the pool's.
	idleFor time.Duration
	clean   bool // the last transaction ended with 250 after DATA: the next MAIL needs no RSET first
	idle    time.Time
	// pipelining: the server offers PIPELINING (RFC 2920), and transactions are written in groups
	// (pipelining.go) over bw and answered through br.
	pipelining bool
	// chunking: the server offers CHUNKING (RFC 3030) as well, and Config.NoChunking is not set: the
	// content goes with the commands as one BDAT chunk (pipelining.go).
	chunking bool
	bw       *bufio.Writer
	br       *bufio.Reader
	// rc is the plaintext side the session's readers read through (replyconn.go), sock the socket under
	// it; inputWaiting looks at both.
	rc   *replyConn
	sock syscall.Conn
}

// pool keeps SMTP connections per destination host:port: at most limit open at once (busy, idle or
// being dialed) so that a receiver never sees more than Concurrency sessions from this process, and idle
// ones kept for reuse up to idleTimeout (RFC 5321 §3.3: one session carries any number of transactions;
// a new TCP, TLS and EHLO handshake per message would cost more than the message).
type pool struct {
	limit       int
	idleTimeout time.Duration
	quit        func(*session) // closes a session politely (QUIT, RFC 5321 §4.1.1.10)
	// shortestIdle is the shortest idle timeout of any site (shaping.go), for the reaper's pace; 0: none.
	shortestIdle time.Duration

	mu      sync.Mutex
	dests   map[string]*destPool
	open    int // all destinations, for the pool gauge
	idleN   int
	closing bool
}

type destPool struct {
	open int
	idle []*session // most recently used last
	// waiting are the jobs waiting for a session, transactional ones first (lanes): otherwise a receipt
	// signed behind a full window would wait for every broadcast message signed before it to be sent.
	waiting lanes
}

var errPoolClosed = errors.New("mta: connection pool closed")

func newPool(limit int, idleTimeout time.Duration, quit func(*session)) *pool {
	return &pool{limit: limit, idleTimeout: idleTimeout, quit: quit, dests: make(map[string]*destPool)}
}

// get returns an idle session for key or dials a new one when fewer than limit are open (the pool's limit
// when limit is 0 or more than it: the site's, shaping.go, may only lower it), waiting otherwise until a
// session is returned, discarded or ctx ends. While it waits, a transactional job (bulk false) is ahead of
// every bulk job.
func (p *pool) get(ctx context.Context, key string, limit int, bulk bool, dial func(context.Context) (*session, error)) (*session, error) {
	if limit <= 0 || limit > p.limit {
		limit = p.limit
	}
	for {
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			return nil, errPoolClosed
		}
		d := p.dests[key]
		if d == nil {
			d = &destPool{}
			p.dests[key] = d
		}
		if n := len(d.idle); n > 0 {
			s := d.idle[n-1]
			d.idle[n-1] = nil
			d.idle = d.idle[:n-1]
			p.idleN--
			p.mu.Unlock()
			return s, nil
		}
		if d.open < limit {
			d.open++
			p.open++
			p.mu.Unlock()
			s, err := dial(ctx)
			if err != nil {
				p.release(key)
				return nil, err
			}
			s.key = key
			return s, nil
		}
		wake := d.waiting.add(bulk)
		p.mu.Unlock()
		if err := d.waiting.wait(ctx, &p.mu, wake); err != nil {
			return nil, err
		}
	}
}

// put returns a healthy session for reuse; with more than limit sessions open to its destination (a site
// backed off since it was opened; 0: no such limit), it is closed instead.
func (p *pool) put(s *session, limit int) {
	p.mu.Lock()
	d := p.dests[s.key]
	if p.closing || d == nil || (limit > 0 && d.open > limit) {
		p.mu.Unlock()
		p.quit(s)
		p.release(s.key)
		return
	}
	s.idle = time.Now()
	d.idle = append(d.idle, s)
	p.idleN++
	d.waiting.wakeNext()
	p.mu.Unlock()
}

// discard closes a session that failed or is in an unknown state.
func (p *pool) discard(s *session) {
	_ = s.client.Close()
	p.release(s.key)
}

// release frees one connection slot of key.
func (p *pool) release(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.dests[key]
	if d == nil {
		return
	}
	d.open--
	p.open--
	d.waiting.wakeNext()
	if d.open == 0 && d.waiting.empty() {
		delete(p.dests, key)
	}
}

// reap closes sessions idle for longer than idleTimeout until ctx ends.
func (p *pool) reap(ctx context.Context) {
	t := time.NewTicker(max(min(p.idleTimeout, cmp.Or(p.shortestIdle, p.idleTimeout))/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.closeIdle(func(s *session) bool { return now.Sub(s.idle) >= cmp.Or(s.idleFor, p.idleTimeout) })
		}
	}
}

// closeIdle closes the idle sessions for which old returns true.
func (p *pool) closeIdle(old func(*session) bool) {
	var stale []*session
	p.mu.Lock()
	for _, d := range p.dests {
		kept := d.idle[:0]
		for _, s := range d.idle {
			if old(s) {
				stale = append(stale, s)
			} else {
				kept = append(kept, s)
			}
		}
		clear(d.idle[len(kept):])
		d.idle = kept
	}
	p.idleN -= len(stale)
	p.mu.Unlock()
	p.quitAll(stale)
}

// close refuses new sessions and closes the idle ones; sessions in use are closed when returned.
func (p *pool) close() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.closeIdle(func(*session) bool { return true })
}

func (p *pool) quitAll(ss []*session) {
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			p.quit(s)
			p.release(s.key)
		})
	}
	wg.Wait()
}

// stats returns the open and idle connection counts.
func (p *pool) stats() (open, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open, p.idleN
}
