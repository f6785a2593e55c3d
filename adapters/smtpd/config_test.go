package smtpd_test

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/smtpd"
)

func TestWithDefaultsTakesTheFieldsFromTheTierThenThePackage(t *testing.T) {
	t.Parallel()
	tier := smtpd.Config{Addr: "127.0.0.1:2525", Domain: "mx.tier.test", MaxMessageBytes: 10 << 20, MaxConnectionsPerIP: 4, ReadTimeout: time.Minute}
	got := smtpd.Config{MaxRecipients: 7}.WithDefaults(tier)
	want := smtpd.Config{
		Addr: "127.0.0.1:2525", Domain: "mx.tier.test", MaxMessageBytes: 10 << 20, MaxRecipients: 7,
		MaxConnections: smtpd.DefaultMaxConnections, MaxConnectionsPerIP: 4,
		ReadTimeout: time.Minute, WriteTimeout: smtpd.DefaultWriteTimeout,
	}
	if got != want {
		t.Errorf("WithDefaults:\n got %+v\nwant %+v", got, want)
	}
	// Given fields win over the tier's.
	own := smtpd.Config{Addr: ":0", Domain: "own.test", MaxConnections: 3, MaxConnectionsPerIP: 2, WriteTimeout: time.Second}.WithDefaults(tier)
	if own.Addr != ":0" || own.Domain != "own.test" || own.MaxConnections != 3 || own.MaxConnectionsPerIP != 2 || own.WriteTimeout != time.Second {
		t.Errorf("given fields replaced: %+v", own)
	}
	// A total below the default per-address bound lowers that bound; the result is valid.
	low := smtpd.Config{MaxConnections: 2}.WithDefaults(smtpd.Config{})
	if low.MaxConnectionsPerIP != 2 || low.Validate() != nil {
		t.Errorf("MaxConnections 2 gives per-address %d (%v)", low.MaxConnectionsPerIP, low.Validate())
	}
	if d := (smtpd.Config{}).WithDefaults(smtpd.Config{}); d.Domain == "" || d.MaxRecipients != smtpd.DefaultMaxRecipients || d.ReadTimeout != smtpd.DefaultReadTimeout {
		t.Errorf("package defaults: %+v", d)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := (smtpd.Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	for _, c := range []struct {
		cfg  smtpd.Config
		want string
	}{
		{smtpd.Config{MaxMessageBytes: -1}, "MaxMessageBytes"},
		{smtpd.Config{MaxRecipients: -1}, "MaxRecipients"},
		{smtpd.Config{MaxConnections: -1}, "MaxConnections must"},
		{smtpd.Config{MaxConnectionsPerIP: -1}, "MaxConnectionsPerIP must"},
		{smtpd.Config{MaxConnections: 4, MaxConnectionsPerIP: 5}, "must not exceed MaxConnections"},
		{smtpd.Config{ReadTimeout: -time.Second}, "timeouts"},
		{smtpd.Config{WriteTimeout: -time.Second}, "timeouts"},
		{smtpd.Config{TLSConfig: &tls.Config{}}, "no certificate"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error about %s", c.cfg, err, c.want)
		}
		if _, nerr := smtpd.New("x", c.cfg, nil, nil); nerr == nil || !strings.HasPrefix(nerr.Error(), "x: ") {
			t.Errorf("New with %+v: %v", c.cfg, nerr)
		}
	}
}
