package deliverability

import (
	"context"
	"testing"
	"time"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/core/sending"
)

// TestAcceptsRecipientAfterKeyRotation: bounces to return paths made under the previous primary master are
// still accepted while that master stays on the keyring, and refused once it is removed.
func TestAcceptsRecipientAfterKeyRotation(t *testing.T) {
	t.Parallel()
	newMaster := []byte("deliverability-test-new-master-secret")
	sentBefore := sending.EncodeVERP(MustVERPKey(t), sending.VERPRecipient, testRecipientID, "acme.example")
	for _, tt := range []struct {
		name    string
		masters [][]byte
		want    bool
	}{
		{"old master kept", [][]byte{newMaster, testMaster}, true},
		{"old master removed", [][]byte{newMaster}, false},
	} {
		kr, err := secret.NewKeyring(tt.masters...)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{}, Deps{Store: refusingStore{tb: t}, Keyring: kr, Clock: fixedClock{time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.AcceptsRecipient(context.Background(), sentBefore); err != nil || got != tt.want {
			t.Errorf("%s: AcceptsRecipient = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}
