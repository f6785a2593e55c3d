package account

import (
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// rfc6238Secret is the SHA-1 seed of RFC 6238 Appendix B, "12345678901234567890", in base32.
const rfc6238Secret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"

var sixDigitSHA1 = totp.ValidateOpts{Period: 30, Skew: 1, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// TestTOTPVectors pins the library to RFC 6238 Appendix B (SHA-1 rows, last six of the eight digits).
func TestTOTPVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		unix int64
		want string
	}{
		{59, "287082"},
		{1111111109, "081804"},
		{1111111111, "050471"},
		{1234567890, "005924"},
		{2000000000, "279037"},
		{20000000000, "353130"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			at := time.Unix(tt.unix, 0)
			got, err := totp.GenerateCodeCustom(rfc6238Secret, at, sixDigitSHA1)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("code at %d = %s, want %s", tt.unix, got, tt.want)
			}
			ok, err := totp.ValidateCustom(tt.want, rfc6238Secret, at, sixDigitSHA1)
			if err != nil || !ok {
				t.Fatalf("ValidateCustom(%s) = %v, %v", tt.want, ok, err)
			}
		})
	}
}

func TestMatchTOTP(t *testing.T) {
	t.Parallel()
	// At 1111111109 the step is 37037036; 081804 is that step's code.
	at := time.Unix(1111111109, 0)
	const step = 37037036
	code := func(s int64) string {
		c, err := totp.GenerateCodeCustom(rfc6238Secret, time.Unix(s*30, 0), sixDigitSHA1)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name     string
		code     string
		now      time.Time
		lastStep uint64
		wantStep uint64
		wantOK   bool
	}{
		{name: "current step", code: "081804", now: at, wantStep: step, wantOK: true},
		{name: "previous step within skew", code: code(step - 1), now: at, wantStep: step - 1, wantOK: true},
		{name: "next step within skew", code: code(step + 1), now: at, wantStep: step + 1, wantOK: true},
		{name: "two steps old", code: code(step - 2), now: at},
		{name: "two steps ahead", code: code(step + 2), now: at},
		{name: "same code 30 s later is the previous step", code: "081804", now: at.Add(30 * time.Second), wantStep: step, wantOK: true},
		{name: "same code 60 s later has expired", code: "081804", now: at.Add(60 * time.Second)},
		{name: "replay of the accepted step", code: "081804", now: at, lastStep: step},
		{name: "older than the accepted step", code: code(step - 1), now: at, lastStep: step},
		{name: "newer than the accepted step", code: code(step + 1), now: at, lastStep: step, wantStep: step + 1, wantOK: true},
		{name: "wrong code", code: "000000", now: at},
		{name: "five digits", code: "81804", now: at},
		{name: "seven digits", code: "0081804", now: at},
		{name: "not digits", code: "08180a", now: at},
		{name: "empty", code: "", now: at},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := matchTOTP(rfc6238Secret, tt.code, tt.now, tt.lastStep)
			if ok != tt.wantOK || got != tt.wantStep {
				t.Fatalf("matchTOTP = %d, %v; want %d, %v", got, ok, tt.wantStep, tt.wantOK)
			}
		})
	}
}

func TestTOTPEnrolmentKey(t *testing.T) {
	t.Parallel()
	key, err := totp.Generate(totp.GenerateOpts{Issuer: totpIssuer, AccountName: "alice@example.com", Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	url := key.URL()
	for _, want := range []string{"otpauth://totp/Postmill:alice@example.com?", "issuer=Postmill", "algorithm=SHA1", "digits=6", "period=30", "secret=" + key.Secret()} {
		if !strings.Contains(url, want) {
			t.Fatalf("otpauth URL %q lacks %q", url, want)
		}
	}
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	code, err := totp.GenerateCodeCustom(key.Secret(), now, sixDigitSHA1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := matchTOTP(key.Secret(), code, now, 0); !ok {
		t.Fatal("a freshly generated seed's code did not match")
	}
}

func TestTOTPState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      []byte
		want    totpState
		wantErr bool
	}{
		{name: "round trip", in: totpState{Secret: rfc6238Secret, LastStep: 37037036}.marshal(), want: totpState{Secret: rfc6238Secret, LastStep: 37037036}},
		{name: "never used", in: totpState{Secret: "ABC"}.marshal(), want: totpState{Secret: "ABC"}},
		{name: "unknown version", in: append([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0}, "ABC"...), wantErr: true},
		{name: "no secret", in: []byte{totpStateVersion, 0, 0, 0, 0, 0, 0, 0, 0}, wantErr: true},
		{name: "bare base32 seed", in: []byte(rfc6238Secret), wantErr: true},
		{name: "empty", in: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := unmarshalTOTPState(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("unmarshalTOTPState = %+v, %v; want %+v, wantErr %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
