package mta

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the MTA tier's configuration. Zero fields take the values of DefaultConfig, so the composition
// root sets only what the operator configured.
type Config struct {
	// Port is the TCP port of recipient MX hosts. RFC 5321 §5.1 delivers to port 25; tests and private
	// deployments (POSTMILL_MTA_PORT) point it elsewhere.
	Port int
	// Relay is a host:port smarthost (POSTMILL_MTA_RELAY). When set, every message goes there and no MX is
	// looked up; "" delivers straight to each recipient domain's MX hosts.
	Relay string
	// RelayUsername and RelayPassword authenticate to the relay with AUTH PLAIN (RFC 4954). The password is
	// sent only over TLS, or in plaintext when the relay is on a loopback address.
	RelayUsername string
	RelayPassword string
	// HELO is the name the MTA introduces itself with in EHLO (RFC 5321 §4.1.1.1: the client's FQDN).
	// Default: the host name.
	HELO string
	// Concurrency caps the connections open to one destination host:port at once, so that one busy
	// receiver is never flooded (receivers throttle or block senders that open too many sessions).
	Concurrency int
	// Workers caps the jobs in flight across all destinations. Most of a job's time is spent waiting (for
	// the store, the receiving server, a signing turn), and the store writes the outcomes of jobs that
	// finish together in one transaction, so many more jobs than cores are in flight at once.
	Workers int
	// ReceiveBatch is the most deliveries asked from the queue in one Receive.
	ReceiveBatch int
	// Signers is how many jobs sign at once (signstage.go), and how many niced signing threads there are.
	// Default: GOMAXPROCS when Run starts. Give the process that many more processors than it would have
	// otherwise (deploy/app does, unless GOMAXPROCS is set) so that the signing jobs do not take the ones
	// the rest of the process needs.
	Signers int
	// SigningNice is the nice value of the signing threads used while Foreground reports true (Linux;
	// elsewhere they keep the process's priority): the kernel then runs the process's other threads, those
	// answering an API request, before them. Default: DefaultSigningNice; a negative value keeps the
	// process's priority throughout.
	SigningNice int
	// Foreground reports whether the process is serving requests that signing should give way to (the
	// edge's HTTP requests in an all-in-one process). Nil: never.
	Foreground func() bool
	// Window caps the jobs holding a built and signed message for one destination host at once, sending
	// or waiting for one of its connections (the signed-ahead window; Workers caps them across all
	// destinations). Default: DefaultWindowPerConnection per connection allowed to the destination.
	Window int
	// ConnectTimeout bounds one TCP connect.
	ConnectTimeout time.Duration
	// CommandTimeout bounds the wait for each SMTP reply and each block of DATA written (RFC 5321 §4.5.3.2
	// recommends 5 minutes); the reply to the final dot waits twice as long (§4.5.3.2.6: 10 minutes).
	CommandTimeout time.Duration
	// IdleConnTimeout is how long a connection stays open between transactions to be reused.
	IdleConnTimeout time.Duration
	// LeaseRenewInterval is how often a job still in progress renews its queue lease (for queues whose
	// deliveries implement ports.LeaseRenewer); it must be well below the queue's lease (5 minutes for
	// PostgreSQL).
	LeaseRenewInterval time.Duration
	// TLSConfig is used for STARTTLS (RFC 3207); nil means the system roots. Its ServerName is filled per
	// destination. Certificates are always verified: InsecureSkipVerify here is refused by Validate.
	TLSConfig *tls.Config
	// InsecureSkipVerify turns certificate verification off. It exists for tests against self-signed
	// servers and must never be set in production.
	InsecureSkipVerify bool
	// RequireTLS refuses to deliver over a session without STARTTLS (or whose TLS handshake failed), to
	// every destination. When false, TLS is opportunistic — used when offered, and a refused STARTTLS or a
	// failed handshake falls back to plaintext, recorded in the outcome and counted — except for recipient
	// domains whose Deps.TLSPolicy requires it. (This is the sender's policy, not the RFC 8689 REQUIRETLS
	// extension.)
	RequireTLS bool
	// AllowNets are prefixes exempt from the forbidden-address rule (ports/netguard) for the addresses of
	// MX hosts and implicit MX (POSTMILL_MTA_ALLOW_NETS): private deployments whose receivers sit on an
	// internal network, and tests delivering to loopback. The relay is trusted by configuration and never
	// checked.
	AllowNets []netip.Prefix
	// JournalDir holds the handed-over journal (POSTMILL_DATA_DIR/mta): which jobs a receiving server
	// accepted with their outcomes, written durably before the outcome is reported, so a job whose report
	// failed is reported again on redelivery instead of being sent again. "" keeps the journal in memory:
	// a redelivery to the same process is still not sent twice, but a restart forgets.
	JournalDir string
	// MaxDeliveries caps how often one job is handed to the MTA without its outcome being recorded (a
	// failing core, a report it refuses, a crash while handling it). The delivery that reaches the cap
	// dead-letters the job: its recipients are reported failed with the reason, or, when even that report
	// fails, the queue keeps the job among its dead letters (docs/operations.md).
	MaxDeliveries int
	// RedeliveryBackoff is how long a job that could not be settled stays hidden before its next delivery;
	// it doubles with every delivery (with jitter) up to MaxRedeliveryBackoff.
	RedeliveryBackoff    time.Duration
	MaxRedeliveryBackoff time.Duration
	// SimulatorDomain and SimulatorAddr route every recipient of one domain to one loopback address: the
	// mailbox simulator of this process (mta/simulator, POSTMILL_SIMULATOR). Mail for that domain goes
	// there before the relay and without any DNS lookup; the address is exempt from the forbidden-address
	// rule, and only a loopback address is accepted. Both empty: no such route.
	SimulatorDomain string
	SimulatorAddr   netip.AddrPort
	// Shaping shapes the traffic per destination site: connections, message rate, messages per connection
	// and idle timeout per MX roll-up, with an adaptive back-off from sites that throttle (site.go,
	// POSTMILL_MTA_SHAPING_FILE). nil: the built-in rules (DefaultSites) and Concurrency and
	// IdleConnTimeout for every other site.
	Shaping *Shaping
	// NoChunking keeps to DATA with servers that offer CHUNKING (RFC 3030) beside PIPELINING; by default
	// the content goes as one BDAT chunk in the same write as MAIL and the RCPTs: one round trip a message
	// instead of two (pipelining.go).
	NoChunking bool
}

// Defaults of Config. DefaultConcurrency is Postfix's default per-destination concurrency limit
// (default_destination_concurrency_limit): what large receivers see from an ordinary MTA. A receiver that
// wants fewer answers 421, which defers the message for a later attempt. Each connection carries one
// transaction at a time, two round trips with PIPELINING, so a destination 10 ms away takes about 35 messages
// a second per connection (docs/benchmarks.md): 10 connections held one destination near 370 per second;
// one round trip when the server offers CHUNKING too (20 connections to a sink 20 ms away: 702-833 msg/s
// against 424-428 with DATA).
const (
	DefaultPort         = 25
	DefaultConcurrency  = 20
	DefaultWorkers      = 128
	DefaultReceiveBatch = 32
	// DefaultSigningNice gives a signing thread about a tenth of the CPU a thread at the normal priority
	// gets when both want the same core (the kernel's weights: 110 against 1024), and all of it otherwise.
	DefaultSigningNice     = 10
	DefaultConnectTimeout  = 30 * time.Second
	DefaultCommandTimeout  = 5 * time.Minute
	DefaultIdleConnTimeout = 30 * time.Second
	// DefaultLeaseRenewInterval renews a fifth of the PostgreSQL queue's default lease.
	DefaultLeaseRenewInterval = time.Minute
	// DefaultMaxDeliveries with the default backoff gives a job about two hours (5 s doubling to 15 min)
	// before it is dead-lettered: a core outage of that length is survived without an operator.
	DefaultMaxDeliveries        = 16
	DefaultRedeliveryBackoff    = 5 * time.Second
	DefaultMaxRedeliveryBackoff = 15 * time.Minute
)

// DefaultWindowPerConnection is the default Window per connection allowed to a destination: enough signed
// messages that a connection finishing a transaction finds the next one ready.
const DefaultWindowPerConnection = 4

// DefaultConfig returns the configuration used for every zero field of a Config.
func DefaultConfig() Config {
	helo, err := os.Hostname()
	if err != nil || helo == "" {
		helo = "localhost"
	}
	return Config{
		Port:               DefaultPort,
		HELO:               helo,
		Concurrency:        DefaultConcurrency,
		Workers:            DefaultWorkers,
		ReceiveBatch:       DefaultReceiveBatch,
		ConnectTimeout:     DefaultConnectTimeout,
		CommandTimeout:     DefaultCommandTimeout,
		IdleConnTimeout:    DefaultIdleConnTimeout,
		LeaseRenewInterval: DefaultLeaseRenewInterval,

		MaxDeliveries:        DefaultMaxDeliveries,
		RedeliveryBackoff:    DefaultRedeliveryBackoff,
		MaxRedeliveryBackoff: DefaultMaxRedeliveryBackoff,
	}
}

// withDefaults fills the zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Port == 0 {
		c.Port = d.Port
	}
	if c.HELO == "" {
		c.HELO = d.HELO
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.ReceiveBatch == 0 {
		c.ReceiveBatch = min(d.ReceiveBatch, c.Workers)
	}
	if c.Window == 0 {
		c.Window = DefaultWindowPerConnection * c.Concurrency
	}
	if c.SigningNice == 0 {
		c.SigningNice = DefaultSigningNice
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = d.CommandTimeout
	}
	if c.LeaseRenewInterval == 0 {
		c.LeaseRenewInterval = d.LeaseRenewInterval
	}
	if c.IdleConnTimeout == 0 {
		c.IdleConnTimeout = d.IdleConnTimeout
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = d.MaxDeliveries
	}
	if c.RedeliveryBackoff == 0 {
		c.RedeliveryBackoff = d.RedeliveryBackoff
	}
	if c.MaxRedeliveryBackoff == 0 {
		c.MaxRedeliveryBackoff = max(d.MaxRedeliveryBackoff, c.RedeliveryBackoff)
	}
	return c
}

// Validate reports every invalid field. Zero values are valid: they mean the default.
func (c Config) Validate() error {
	var errs []error
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("mta: port %d out of range", c.Port))
	}
	if c.Relay != "" {
		host, port, err := net.SplitHostPort(c.Relay)
		if err != nil || host == "" {
			errs = append(errs, fmt.Errorf("mta: relay %q is not host:port", c.Relay))
		} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("mta: relay %q has an invalid port", c.Relay))
		}
	}
	if c.RelayUsername == "" && c.RelayPassword != "" {
		errs = append(errs, errors.New("mta: relay password set without a relay username"))
	}
	if c.RelayUsername != "" && c.Relay == "" {
		errs = append(errs, errors.New("mta: relay username set without a relay"))
	}
	if strings.ContainsAny(c.HELO, " \t\r\n") {
		errs = append(errs, fmt.Errorf("mta: HELO name %q contains white space", c.HELO))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"concurrency", c.Concurrency}, {"workers", c.Workers}, {"receive batch", c.ReceiveBatch}, {"window", c.Window}, {"max deliveries", c.MaxDeliveries}, {"signers", c.Signers}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("mta: %s must not be negative", f.name))
		}
	}
	if c.SigningNice > 19 {
		errs = append(errs, errors.New("mta: signing nice value must be at most 19"))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"connect timeout", c.ConnectTimeout}, {"command timeout", c.CommandTimeout}, {"idle connection timeout", c.IdleConnTimeout},
		{"lease renew interval", c.LeaseRenewInterval}, {"redelivery backoff", c.RedeliveryBackoff}, {"max redelivery backoff", c.MaxRedeliveryBackoff}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("mta: %s must not be negative", f.name))
		}
	}
	if c.RedeliveryBackoff > 0 && c.MaxRedeliveryBackoff > 0 && c.MaxRedeliveryBackoff < c.RedeliveryBackoff {
		errs = append(errs, errors.New("mta: max redelivery backoff is below the redelivery backoff"))
	}
	for _, p := range c.AllowNets {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("mta: invalid allow prefix %v", p))
		}
	}
	if (c.SimulatorDomain != "") != c.SimulatorAddr.IsValid() {
		errs = append(errs, errors.New("mta: the simulator domain and address go together"))
	}
	if c.SimulatorAddr.IsValid() && (!c.SimulatorAddr.Addr().IsLoopback() || c.SimulatorAddr.Port() == 0) {
		errs = append(errs, fmt.Errorf("mta: simulator address %s is not a loopback address with a port", c.SimulatorAddr))
	}
	if strings.ContainsAny(c.SimulatorDomain, " \t\r\n@") {
		errs = append(errs, fmt.Errorf("mta: simulator domain %q is not a domain", c.SimulatorDomain))
	}
	if err := c.Shaping.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.TLSConfig != nil && c.TLSConfig.InsecureSkipVerify {
		errs = append(errs, errors.New("mta: TLSConfig.InsecureSkipVerify is refused; use Config.InsecureSkipVerify (tests only)"))
	}
	return errors.Join(errs...)
}

// tlsConfig returns the STARTTLS configuration for one destination name.
func (c Config) tlsConfig(serverName string) *tls.Config {
	var t *tls.Config
	if c.TLSConfig != nil {
		t = c.TLSConfig.Clone()
	} else {
		t = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if t.ServerName == "" {
		t.ServerName = serverName
	}
	t.InsecureSkipVerify = c.InsecureSkipVerify
	return t
}
