// Package spamd is the spam checker over SpamAssassin's spamd (Debian's spamd package), speaking the SPAMC
// protocol's CHECK command: one TCP connection per message, the verdict from the Spam header of the
// answer. It implements ports.SpamChecker.
package spamd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds one check; spamd with network tests off answers in milliseconds.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBytes is spamc's own limit (500 KB): larger messages are not checked and pass as ham, as
	// spamc passes them; spam is rarely that large and scanning it costs spamd seconds.
	DefaultMaxBytes = 500 << 10
)

// Config says where spamd listens.
type Config struct {
	Addr     string // host:port of spamd's TCP listener
	Timeout  time.Duration
	MaxBytes int
}

// Checker asks spamd about each message. Safe for concurrent use.
type Checker struct{ cfg Config }

var _ ports.SpamChecker = (*Checker)(nil)

// New checks the configuration.
func New(cfg Config) (*Checker, error) {
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("spamd: address %q: %w", cfg.Addr, err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	return &Checker{cfg: cfg}, nil
}

// Check implements ports.SpamChecker: spam when spamd's score reaches its required score.
func (c *Checker) Check(ctx context.Context, raw []byte) (ports.SpamVerdict, error) {
	if len(raw) > c.cfg.MaxBytes {
		return ports.SpamVerdict{Status: ports.SpamHam}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.cfg.Addr)
	if err != nil {
		return ports.SpamVerdict{}, fmt.Errorf("spamd: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "CHECK SPAMC/1.5\r\nContent-length: %d\r\n\r\n", len(raw)); err != nil {
		return ports.SpamVerdict{}, fmt.Errorf("spamd: %w", err)
	}
	if _, err := conn.Write(raw); err != nil {
		return ports.SpamVerdict{}, fmt.Errorf("spamd: %w", err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	return parseAnswer(bufio.NewReader(io.LimitReader(conn, 64<<10)))
}

// parseAnswer reads "SPAMD/1.1 0 EX_OK" and the "Spam: True ; 7.5 / 5.0" header.
func parseAnswer(r *bufio.Reader) (ports.SpamVerdict, error) {
	status, err := r.ReadString('\n')
	if err != nil {
		return ports.SpamVerdict{}, fmt.Errorf("spamd: no answer: %w", err)
	}
	f := strings.Fields(status)
	if len(f) < 3 || !strings.HasPrefix(f[0], "SPAMD/") || f[1] != "0" {
		return ports.SpamVerdict{}, fmt.Errorf("spamd: refused: %q", strings.TrimSpace(status))
	}
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "Spam") {
			return verdict(value)
		}
		if err != nil || line == "" {
			return ports.SpamVerdict{}, errors.New("spamd: the answer has no Spam header")
		}
	}
}

// verdict reads " True ; 100.0 / 5.0".
func verdict(v string) (ports.SpamVerdict, error) {
	flag, scores, _ := strings.Cut(v, ";")
	score, _, _ := strings.Cut(scores, "/")
	s, err := strconv.ParseFloat(strings.TrimSpace(score), 64)
	if err != nil {
		return ports.SpamVerdict{}, fmt.Errorf("spamd: score %q: %w", score, err)
	}
	out := ports.SpamVerdict{Status: ports.SpamHam, Score: s}
	switch strings.ToLower(strings.TrimSpace(flag)) {
	case "true", "yes":
		out.Status = ports.SpamSpam
	}
	return out, nil
}
