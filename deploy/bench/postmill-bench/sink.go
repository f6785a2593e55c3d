package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sink is the benchmark's receiving MX: an SMTP server in this process that accepts every message, counts
// each arrival in the second it completed (the arrival curve) and remembers each Message-ID so that a
// message delivered twice is seen. It answers as a large receiver does: ESMTP with PIPELINING (RFC 2920),
// CHUNKING (RFC 3030), 8BITMIME, SIZE and ENHANCEDSTATUSCODES, replies to pipelined commands written in one go, and no
// per-session limit on transactions. It costs a few microseconds per message, far below what the MTA
// spends, so the figure measured is Postmill's.
type sink struct {
	ln         net.Listener
	pipelining bool
	chunking   bool
	// rtt is waited before every write of replies: the round trip to a receiver across a network.
	rtt time.Duration

	start    atomic.Int64 // unix nanoseconds of the clock's zero; 0 = not started (arrivals still counted)
	count    atomic.Int64
	sessions atomic.Int64
	maxOpen  atomic.Int64
	open     atomic.Int64

	mu       sync.Mutex
	perSec   []int64 // arrivals per second since start
	seen     map[string]bool
	dupes    int64
	first    time.Time // the first arrival since the clock started
	last     time.Time
	sizes    int64
	noID     int64
	rcptsPer map[int]int64    // recipients per transaction → transactions
	byDomain map[string]int64 // messages per recipient domain (a message to several counts for each)
}

func startSink(pipelining, chunking bool) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{ln: ln, pipelining: pipelining, chunking: chunking, seen: make(map[string]bool), rcptsPer: make(map[int]int64), byDomain: make(map[string]int64)}
	go s.serve()
	return s, nil
}

func (s *sink) addr() string { return s.ln.Addr().String() }

func (s *sink) close() { _ = s.ln.Close() }

// startClock sets the zero of the arrival curve.
func (s *sink) startClock(t time.Time) {
	s.mu.Lock()
	s.perSec, s.first = nil, time.Time{}
	s.mu.Unlock()
	s.start.Store(t.UnixNano())
}

func (s *sink) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.session(c)
	}
}

func (s *sink) session(c net.Conn) {
	defer c.Close()
	s.sessions.Add(1)
	n := s.open.Add(1)
	defer s.open.Add(-1)
	for {
		m := s.maxOpen.Load()
		if n <= m || s.maxOpen.CompareAndSwap(m, n) {
			break
		}
	}
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 16<<10)
	reply := func(line string) bool {
		_, _ = w.WriteString(line)
		// Replies to pipelined commands go out together: flush only when no command is waiting.
		if r.Buffered() == 0 {
			if s.rtt > 0 {
				time.Sleep(s.rtt)
			}
			return w.Flush() == nil
		}
		return true
	}
	if !reply("220 mx.rcpt.example ESMTP postmill-bench sink\r\n") {
		return
	}
	rcpts := 0
	var domains []string // the recipient domains of the transaction
	var body bytes.Buffer
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(string(bytes.TrimSpace(line)))
		verb, _, _ := strings.Cut(cmd, " ")
		var ok bool
		switch verb {
		case "EHLO":
			ext := "250-mx.rcpt.example\r\n"
			if s.pipelining {
				ext += "250-PIPELINING\r\n"
			}
			if s.chunking {
				ext += "250-CHUNKING\r\n"
			}
			ok = reply(ext + "250-8BITMIME\r\n250-SIZE 52428800\r\n250 ENHANCEDSTATUSCODES\r\n")
		case "HELO":
			ok = reply("250 mx.rcpt.example\r\n")
		case "MAIL":
			body.Reset()
			rcpts, domains = 0, domains[:0]
			ok = reply("250 2.1.0 Ok\r\n")
		case "RCPT":
			rcpts++
			if _, addr, ok := strings.Cut(cmd, "@"); ok {
				addr, _, _ = strings.Cut(addr, " ") // RCPT parameters follow a space
				if d := strings.ToLower(strings.TrimRight(addr, ">")); !slices.Contains(domains, d) {
					domains = append(domains, d)
				}
			}
			ok = reply("250 2.1.5 Ok\r\n")
		case "DATA":
			if rcpts == 0 {
				ok = reply("503 5.5.1 Error: need RCPT command\r\n")
				break
			}
			if !reply("354 End data with <CR><LF>.<CR><LF>\r\n") {
				return
			}
			if w.Buffered() > 0 { // the command after DATA is the content: the 354 must go now
				if s.rtt > 0 {
					time.Sleep(s.rtt)
				}
				_ = w.Flush()
			}
			body.Reset()
			if err := readData(r, &body); err != nil {
				return
			}
			id := s.arrived(body.Bytes(), rcpts, domains)
			rcpts, domains = 0, domains[:0]
			ok = reply("250 2.0.0 Ok: queued as " + id + "\r\n")
		case "BDAT":
			// "BDAT <size> [LAST]": the chunk follows the command line at once and is read whatever the
			// answer (RFC 3030 §4.2).
			f := strings.Fields(cmd)
			size, err := strconv.Atoi(f[min(1, len(f)-1)])
			if !s.chunking || err != nil || size < 0 || len(f) > 3 {
				_ = reply("501 5.5.4 Syntax: BDAT size [LAST]\r\n")
				_ = w.Flush()
				return
			}
			if _, err := io.CopyN(&body, r, int64(size)); err != nil {
				return
			}
			switch {
			case rcpts == 0:
				body.Reset()
				ok = reply("503 5.5.1 Error: need RCPT command\r\n")
			case len(f) == 3 && f[2] == "LAST":
				id := s.arrived(body.Bytes(), rcpts, domains)
				body.Reset()
				rcpts, domains = 0, domains[:0]
				ok = reply("250 2.0.0 Ok: queued as " + id + "\r\n")
			default:
				ok = reply("250 2.0.0 Ok: " + strconv.Itoa(size) + " octets\r\n")
			}
		case "RSET":
			body.Reset()
			rcpts, domains = 0, domains[:0]
			ok = reply("250 2.0.0 Ok\r\n")
		case "NOOP":
			ok = reply("250 2.0.0 Ok\r\n")
		case "QUIT":
			_ = reply("221 2.0.0 Bye\r\n")
			_ = w.Flush()
			return
		default:
			ok = reply("502 5.5.2 Error: command not recognized\r\n")
		}
		if !ok {
			return
		}
	}
}

// readData reads the content of DATA up to the line with a single dot (RFC 5321 §4.1.1.4).
func readData(r *bufio.Reader, body *bytes.Buffer) error {
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			body.Write(line)
			continue
		}
		if err != nil {
			return err
		}
		if len(line) == 3 && line[0] == '.' && line[1] == '\r' {
			return nil
		}
		body.Write(line)
	}
}

// arrived records one message and returns its queue id.
func (s *sink) arrived(msg []byte, rcpts int, domains []string) string {
	now := time.Now()
	id := messageID(msg)
	n := s.count.Add(1)
	s.mu.Lock()
	if st := s.start.Load(); st != 0 {
		sec := int(now.UnixNano()-st) / int(time.Second)
		if sec >= 0 {
			for len(s.perSec) <= sec {
				s.perSec = append(s.perSec, 0)
			}
			s.perSec[sec]++
		}
		if s.first.IsZero() {
			s.first = now
		}
	}
	if id == "" {
		s.noID++
	} else if s.seen[id] {
		s.dupes++
	} else {
		s.seen[id] = true
	}
	s.last = now
	s.sizes += int64(len(msg))
	s.rcptsPer[rcpts]++
	for _, d := range domains {
		s.byDomain[d]++
	}
	s.mu.Unlock()
	return strconv.FormatInt(n, 16)
}

// messageID returns the Message-ID field's value of a message's header, "" when it has none.
func messageID(msg []byte) string {
	for len(msg) > 0 {
		i := bytes.IndexByte(msg, '\n')
		if i < 0 {
			i = len(msg) - 1
		}
		line := msg[:i+1]
		msg = msg[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			return "" // end of the header
		}
		if len(line) > 11 && strings.EqualFold(string(line[:11]), "message-id:") {
			return string(bytes.TrimSpace(line[11:]))
		}
	}
	return ""
}

// arrivedFor returns how many messages arrived for recipients of domain (lower case).
func (s *sink) arrivedFor(domain string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byDomain[domain]
}

// curve returns the arrivals per second since the clock started and the time of the last arrival.
func (s *sink) curve() ([]int64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.perSec...), s.last
}

// firstArrival is the time of the first arrival since the clock started (zero before one).
func (s *sink) firstArrival() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// stats returns messages seen twice, messages without a Message-ID and the mean size.
func (s *sink) stats() (dupes, noID, meanSize int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.count.Load(); n > 0 {
		meanSize = s.sizes / n
	}
	return s.dupes, s.noID, meanSize
}

// measureSink drives the sink from conns pipelining clients for d and returns messages/s: the sink's own
// ceiling, so that a delivery figure is known not to be the sink's limit.
func measureSink(s *sink, conns int, d time.Duration) (float64, error) {
	msg := "From: a@bench.example\r\nTo: b@rcpt.example\r\nSubject: ceiling\r\n\r\n" + strings.Repeat("x", 1500) + "\r\n"
	var total atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	errs := make(chan error, conns)
	for range conns {
		wg.Go(func() {
			c, err := net.Dial("tcp", s.addr())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			expect := func(n int) error {
				for range n {
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return err
						}
						if len(line) < 4 || line[3] != '-' {
							break
						}
					}
				}
				return nil
			}
			if _, err := io.WriteString(c, "EHLO ceiling\r\n"); err != nil {
				errs <- err
				return
			}
			if err := expect(2); err != nil {
				errs <- err
				return
			}
			for time.Now().Before(stop) {
				if _, err := io.WriteString(c, "MAIL FROM:<a@bench.example>\r\nRCPT TO:<b@rcpt.example>\r\nDATA\r\n"); err != nil {
					errs <- err
					return
				}
				if err := expect(3); err != nil {
					errs <- err
					return
				}
				if _, err := io.WriteString(c, msg+".\r\n"); err != nil {
					errs <- err
					return
				}
				if err := expect(1); err != nil {
					errs <- err
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("sink ceiling: %w", err)
	}
	return float64(total.Load()) / d.Seconds(), nil
}
