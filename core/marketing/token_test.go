package marketing

import (
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

func testKeyring(t *testing.T, master string) *secret.Keyring {
	t.Helper()
	k, err := secret.NewKeyring([]byte(master))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestPublicTokenRoundTrip(t *testing.T) {
	k := testKeyring(t, "0123456789abcdef0123456789abcdef")
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	cases := []PublicToken{
		{OrganizationID: "0190a000-0000-7000-8000-000000000001", ContactID: "0190a000-0000-7000-8000-000000000002", IssuedAt: at},
		{OrganizationID: "0190a000-0000-7000-8000-000000000001", ContactID: "0190a000-0000-7000-8000-000000000002",
			TopicID: "0190a000-0000-7000-8000-000000000003", BroadcastID: "0190a000-0000-7000-8000-000000000004", IssuedAt: at},
		{OrganizationID: "0190a000-0000-7000-8000-000000000001", ContactID: "0190a000-0000-7000-8000-000000000002",
			BroadcastID: "0190a000-0000-7000-8000-000000000004", IssuedAt: at},
	}
	for _, want := range cases {
		for _, purpose := range []string{PurposeUnsubscribe, PurposeConfirm, PurposePrefs} {
			tok, err := SealPublicToken(k, purpose, want)
			if err != nil {
				t.Fatal(err)
			}
			if len(tok) > MaxPublicTokenLen {
				t.Fatalf("token of %d characters", len(tok))
			}
			for _, id := range []string{want.OrganizationID, want.ContactID, "0190a000"} {
				if strings.Contains(tok, id) {
					t.Fatalf("token %q shows %q", tok, id)
				}
			}
			got, err := OpenPublicToken(k, purpose, tok)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("opened %+v, sealed %+v", got, want)
			}
		}
	}
}

func TestPublicTokenRefusesForeignAndAltered(t *testing.T) {
	k := testKeyring(t, "0123456789abcdef0123456789abcdef")
	other := testKeyring(t, "fedcba9876543210fedcba9876543210")
	pt := PublicToken{OrganizationID: "0190a000-0000-7000-8000-000000000001",
		ContactID: "0190a000-0000-7000-8000-000000000002", IssuedAt: time.Unix(1700000000, 0).UTC()}
	tok, err := SealPublicToken(k, PurposeUnsubscribe, pt)
	if err != nil {
		t.Fatal(err)
	}
	flipped := []byte(tok)
	if flipped[20] == 'A' {
		flipped[20] = 'B'
	} else {
		flipped[20] = 'A'
	}
	bad := map[string]struct {
		keyring *secret.Keyring
		purpose string
		token   string
	}{
		"foreign purpose": {k, PurposePrefs, tok},
		"confirm":         {k, PurposeConfirm, tok},
		"unknown purpose": {k, "other", tok},
		"other keyring":   {other, PurposeUnsubscribe, tok},
		"altered":         {k, PurposeUnsubscribe, string(flipped)},
		"truncated":       {k, PurposeUnsubscribe, tok[:len(tok)-2]},
		"empty":           {k, PurposeUnsubscribe, ""},
		"not base64":      {k, PurposeUnsubscribe, "!!!" + tok},
		"too long":        {k, PurposeUnsubscribe, strings.Repeat("A", MaxPublicTokenLen+1)},
	}
	for name, c := range bad {
		_, err := OpenPublicToken(c.keyring, c.purpose, c.token)
		if ports.ErrorCode(err) != ports.CodeInvalidArgument || ports.ErrorMessage(err) != "invalid token" {
			t.Errorf("%s: err = %v, want invalid token", name, err)
		}
	}
	// A token still opens after a rotation while its master stays on the keyring.
	rotated, err := secret.NewKeyring([]byte("fedcba9876543210fedcba9876543210"), []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPublicToken(rotated, PurposeUnsubscribe, tok); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if _, err := SealPublicToken(k, "other", pt); err == nil {
		t.Fatal("sealed for an unknown purpose")
	}
	if _, err := SealPublicToken(k, PurposeConfirm, PublicToken{OrganizationID: "x", ContactID: pt.ContactID}); err == nil {
		t.Fatal("sealed a malformed id")
	}
}
