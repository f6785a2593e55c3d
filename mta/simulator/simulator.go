// Package simulator is Postmill's mailbox simulator: an SMTP server on a loopback port of the MTA process
// that plays the receiving mail server for the reserved domain simulator.postmill.test (".test" is
// reserved for testing by RFC 2606 §2, so no real mailbox can live there). The MTA routes every recipient
// of that domain here instead of to an MX host or the relay (mta.Config.SimulatorDomain and
// SimulatorAddr), and the simulator answers the way real receivers do, so each outcome travels the same
// code as real mail: the MTA's reply classification, the core's delivery outcomes, and for complaints the
// inbound tier's RFC 5965 parser and the core's feedback rules.
//
//	recipient                      simulator                                  Postmill records
//	delivered@                     250 after DATA                             delivered
//	bounce@                        550 5.1.1 at RCPT                          bounced (hard), suppressed
//	soft-bounce@                   450 4.2.2 at RCPT for the first            delivery_delayed, then delivered
//	                               Config.SoftBounces attempts, then 250
//	complaint@                     250, then an RFC 5965 abuse report         delivered, then complained,
//	                               to the return path, over SMTP to the MX    suppressed
//	                               listener (Config.MX)
//	delay@                         451 4.7.1 at RCPT, every attempt           delivery_delayed until the
//	                                                                          maximum age, then failed
//	anything else @ the domain     550 5.1.1 at RCPT                          bounced, suppressed
//
// A plus tag selects the same behaviour (bounce+signup-test@ is bounce@), so a test can use a fresh
// address each run: a bounced or complained address is suppressed like any other.
//
// Soft-bounce attempts are counted in memory per envelope sender (the VERP return path) and recipient, by
// the simulator of the MTA process that delivers the attempt. The complaint report waits until the
// delivery of its message has been recorded (Server.Delivery wraps the MTA's ports.DeliveryService to
// learn it), as a mailbox provider's feedback loop reports long after it accepted the mail; a report whose
// recording is not seen within Config.ComplaintWait is sent anyway.
package simulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/postmill/postmill/adapters/smtpd"
)

// Domain is the reserved recipient domain the simulator answers for.
const Domain = "simulator.postmill.test"

// Behaviour is what the simulator does with a recipient: the local part of its address without a plus tag.
type Behaviour string

// The simulator's addresses (Behaviour + "@" + Domain).
const (
	Delivered  Behaviour = "delivered"
	Bounce     Behaviour = "bounce"
	SoftBounce Behaviour = "soft-bounce"
	Complaint  Behaviour = "complaint"
	Delay      Behaviour = "delay"
)

var behaviours = []Behaviour{Delivered, Bounce, SoftBounce, Complaint, Delay}

// Lookup returns the behaviour of address: its local part, lower-cased, without a plus tag. ok is false for
// an address outside Domain or a local part that names no behaviour.
func Lookup(address string) (b Behaviour, ok bool) {
	a := strings.ToLower(strings.Trim(strings.TrimSpace(address), "<>"))
	at := strings.LastIndexByte(a, '@')
	if at < 0 || strings.TrimSuffix(a[at+1:], ".") != Domain {
		return "", false
	}
	local := a[:at]
	if plus := strings.IndexByte(local, '+'); plus >= 0 {
		local = local[:plus]
	}
	for _, b := range behaviours {
		if local == string(b) {
			return b, true
		}
	}
	return "", false
}

// Defaults of Config.
const (
	// DefaultAddr is a free loopback port: only the MTA of this process connects.
	DefaultAddr = "127.0.0.1:0"
	// DefaultSoftBounces is how many attempts soft-bounce@ defers before one is accepted.
	DefaultSoftBounces = 2
	// DefaultComplaintWait bounds the wait of a complaint report for the recording of its delivery.
	DefaultComplaintWait = 30 * time.Second
	// DefaultMaxConnections lets the MTA open as many sessions as it does to any destination (its
	// POSTMILL_MTA_CONCURRENCY) with room to spare; every session comes from the same loopback address.
	DefaultMaxConnections = 256
)

// Config is the simulator's configuration; zero fields take the defaults above.
type Config struct {
	// Addr is the loopback address to listen on; ":0" picks a free port (Listen reports it).
	Addr string
	// SoftBounces is how many attempts of a soft-bounce@ recipient are deferred before one is accepted.
	SoftBounces int
	// MX returns the host:port of Postmill's MX listener (the inbound tier, POSTMILL_SMTP_ADDR) that
	// complaint reports are submitted to; it is asked for each report, so a listener started after the
	// simulator is found. nil, or an empty answer, leaves complaint@ delivered without a report (logged).
	MX func() string
	// ComplaintWait bounds how long a complaint report waits for the delivery of its message to be
	// recorded before it is sent anyway.
	ComplaintWait time.Duration
	// MaxConnections bounds the sessions served at once.
	MaxConnections int
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.SoftBounces == 0 {
		c.SoftBounces = DefaultSoftBounces
	}
	if c.ComplaintWait == 0 {
		c.ComplaintWait = DefaultComplaintWait
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	return c
}

// Validate reports every invalid field. The address must be a loopback one: the simulator takes mail from
// anyone who connects and, for complaint@, sends mail on its behalf.
func (c Config) Validate() error {
	var errs []error
	if c.Addr != "" {
		host, _, err := net.SplitHostPort(c.Addr)
		ip, perr := netip.ParseAddr(host)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("simulator: address %q is not host:port", c.Addr))
		case host != "localhost" && (perr != nil || !ip.IsLoopback()):
			errs = append(errs, fmt.Errorf("simulator: address %q is not a loopback address", c.Addr))
		}
	}
	if c.SoftBounces < 0 || c.MaxConnections < 0 || c.ComplaintWait < 0 {
		errs = append(errs, errors.New("simulator: soft bounces, max connections and complaint wait must not be negative"))
	}
	return errors.Join(errs...)
}

// Server is the simulator's SMTP server. Build it with New, then Listen and Serve; Shutdown stops it and
// the complaint reports still waiting.
type Server struct {
	cfg      Config
	log      *slog.Logger
	smtpd    *smtpd.Server
	attempts attempts
	gate     gate

	ctx     context.Context // ends when Shutdown gives up on the reports still in flight
	cancel  context.CancelFunc
	mu      sync.Mutex
	closing bool // Shutdown is waiting for the reports: no new one starts
	reports sync.WaitGroup
}

// New builds the simulator; nothing listens until Listen or Serve.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: logger.With("component", "simulator")}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var err error
	s.smtpd, err = smtpd.New("simulator", smtpd.Config{
		Addr: cfg.Addr, Domain: Domain, MaxConnections: cfg.MaxConnections, MaxConnectionsPerIP: cfg.MaxConnections,
	}.WithDefaults(smtpd.Config{}), smtp.BackendFunc(s.newSession), s.log, func(srv *smtp.Server) {
		srv.EnableSMTPUTF8 = true // a sender's internationalized From must not turn into a bounce here
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Listen binds Config.Addr and returns the bound address, for mta.Config.SimulatorAddr.
func (s *Server) Listen() (netip.AddrPort, error) {
	a, err := s.smtpd.Listen()
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("simulator: bound address %s: %w", a, err)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// Addr is the bound address after Listen, the zero AddrPort before.
func (s *Server) Addr() netip.AddrPort {
	a := s.smtpd.Addr()
	if a == nil {
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Serve accepts connections until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve() error { return s.smtpd.Serve() }

// Shutdown stops accepting, waits for sessions to end and for complaint reports in flight, and when ctx
// ends first cuts both short (a report not sent then is logged and lost: the simulator keeps no queue).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.smtpd.Shutdown(ctx)
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.reports.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
	}
	s.cancel()
	return err
}
