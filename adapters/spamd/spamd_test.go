package spamd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/spamd"
	"github.com/postmill/postmill/adapters/spamd/spamdtest"
	"github.com/postmill/postmill/ports"
)

// TestCheck: spamd's verdict and score come back; an oversized message passes unchecked; a dead spamd is an
// error, not a verdict.
func TestCheck(t *testing.T) {
	t.Parallel()
	c, err := spamd.New(spamd.Config{Addr: spamdtest.Start(t), MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(subject string, pad int) []byte {
		return fmt.Appendf(nil, "From: a@sender.test\r\nTo: b@inbound.test\r\nSubject: %s\r\n\r\nhello%s\r\n", subject, make([]byte, pad))
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"spam", msg("buy now postmill-spam-test", 0), ports.SpamSpam},
		{"ham", msg("lunch", 0), ports.SpamHam},
		{"oversized spam passes unchecked", msg("postmill-spam-test", 5000), ports.SpamHam},
	} {
		v, err := c.Check(context.Background(), tc.raw)
		if err != nil || v.Status != tc.want {
			t.Errorf("%s: %+v, %v; want %s", tc.name, v, err, tc.want)
		}
		if tc.name == "spam" && v.Score < 100 {
			t.Errorf("spam score %v, want at least 100", v.Score)
		}
	}
	dead, _ := spamd.New(spamd.Config{Addr: "127.0.0.1:1", Timeout: time.Second})
	if _, err := dead.Check(context.Background(), msg("x", 0)); err == nil {
		t.Error("a spamd that does not answer gave a verdict")
	}
	if _, err := spamd.New(spamd.Config{Addr: "nohost"}); err == nil {
		t.Error("an address without a port was accepted")
	}
}
