package smtpd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"time"
)

// Defaults both listeners share unless their own defaults say otherwise (see Config.WithDefaults).
const (
	// DefaultMaxRecipients bounds RCPT commands per transaction (RFC 5321 §4.5.3.1.8 asks for at least 100).
	DefaultMaxRecipients = 100
	// DefaultMaxConnections bounds sessions served at once. Beyond it a client is greeted with 421 and
	// retries later (RFC 5321 §3.8).
	DefaultMaxConnections = 64
	// DefaultMaxConnectionsPerIP bounds the sessions of one client address (an IPv6 client's /64), so one
	// host cannot hold every slot of DefaultMaxConnections.
	DefaultMaxConnectionsPerIP = 8
	// DefaultReadTimeout is RFC 5321 §4.5.3.2.7's server timeout: five minutes waiting for the next command.
	DefaultReadTimeout = 5 * time.Minute
	// DefaultWriteTimeout bounds writing one reply to a client that stopped reading.
	DefaultWriteTimeout = time.Minute
)

// Config is what an SMTP listener is told by the composition root: where it listens, its TLS, and the
// limits that keep a hostile or broken client from holding memory, CPU or connection slots. The submission
// server and the MX listener both embed it; each fills the zero fields from its own defaults with
// WithDefaults and checks the result with Validate.
type Config struct {
	// Addr is the TCP address to listen on; ":0" picks a free port (Listen reports it).
	Addr string
	// Domain is the host name of the greeting and the EHLO reply; empty means the machine's host name.
	Domain string
	// TLSConfig enables STARTTLS (RFC 3207) with its certificates; nil offers no TLS.
	TLSConfig *tls.Config
	// MaxMessageBytes bounds a message (advertised as SIZE, RFC 1870); a larger one is refused with
	// 552 5.3.4 as soon as it crosses the bound.
	MaxMessageBytes int64
	// MaxRecipients bounds envelope recipients per transaction.
	MaxRecipients int
	// MaxConnections bounds sessions served at once; MaxConnectionsPerIP bounds those of one client
	// address (IPv4 address, or IPv6 /64). A client beyond either is greeted with 421 and disconnected.
	MaxConnections      int
	MaxConnectionsPerIP int
	// ReadTimeout bounds the wait for each command line, and also the whole DATA transfer that follows
	// a DATA command (go-smtp sets one read deadline per command). WriteTimeout bounds writing one reply.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
}

// WithDefaults returns c with every zero field taken from d, then from this package's defaults; an empty
// Domain becomes the machine's host name ("localhost" when it has none).
func (c Config) WithDefaults(d Config) Config {
	pick := func(v, tier, pkg int64) int64 {
		switch {
		case v != 0:
			return v
		case tier != 0:
			return tier
		}
		return pkg
	}
	if c.Addr == "" {
		c.Addr = d.Addr
	}
	if c.Domain == "" {
		c.Domain = d.Domain
	}
	if c.Domain == "" {
		c.Domain, _ = os.Hostname()
		if c.Domain == "" {
			c.Domain = "localhost"
		}
	}
	if c.TLSConfig == nil {
		c.TLSConfig = d.TLSConfig
	}
	c.MaxMessageBytes = pick(c.MaxMessageBytes, d.MaxMessageBytes, 0)
	c.MaxRecipients = int(pick(int64(c.MaxRecipients), int64(d.MaxRecipients), DefaultMaxRecipients))
	c.MaxConnections = int(pick(int64(c.MaxConnections), int64(d.MaxConnections), DefaultMaxConnections))
	perIPGiven := c.MaxConnectionsPerIP != 0
	c.MaxConnectionsPerIP = int(pick(int64(c.MaxConnectionsPerIP), int64(d.MaxConnectionsPerIP), DefaultMaxConnectionsPerIP))
	if !perIPGiven && c.MaxConnectionsPerIP > c.MaxConnections {
		// A total set below the default per-address bound lowers that bound with it.
		c.MaxConnectionsPerIP = c.MaxConnections
	}
	c.ReadTimeout = time.Duration(pick(int64(c.ReadTimeout), int64(d.ReadTimeout), int64(DefaultReadTimeout)))
	c.WriteTimeout = time.Duration(pick(int64(c.WriteTimeout), int64(d.WriteTimeout), int64(DefaultWriteTimeout)))
	return c
}

// Validate rejects configurations that would make the listener refuse everything or fail late: negative
// bounds, a per-address connection bound above the total one, TLS without a certificate. Zero fields are
// valid (WithDefaults fills them).
func (c Config) Validate() error {
	var errs []error
	if c.MaxMessageBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxMessageBytes must not be negative (got %d)", c.MaxMessageBytes))
	}
	if c.MaxRecipients < 0 {
		errs = append(errs, fmt.Errorf("MaxRecipients must not be negative (got %d)", c.MaxRecipients))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("MaxConnections must not be negative (got %d)", c.MaxConnections))
	}
	if c.MaxConnectionsPerIP < 0 {
		errs = append(errs, fmt.Errorf("MaxConnectionsPerIP must not be negative (got %d)", c.MaxConnectionsPerIP))
	}
	if c.MaxConnections > 0 && c.MaxConnectionsPerIP > c.MaxConnections {
		errs = append(errs, fmt.Errorf("MaxConnectionsPerIP (%d) must not exceed MaxConnections (%d)", c.MaxConnectionsPerIP, c.MaxConnections))
	}
	if c.ReadTimeout < 0 || c.WriteTimeout < 0 {
		errs = append(errs, errors.New("timeouts must not be negative"))
	}
	if c.TLSConfig != nil && len(c.TLSConfig.Certificates) == 0 && c.TLSConfig.GetCertificate == nil && c.TLSConfig.GetConfigForClient == nil {
		errs = append(errs, errors.New("TLSConfig has no certificate"))
	}
	return errors.Join(errs...)
}
