package account

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postmill/postmill/core/secret"
)

func TestNewAPIKeyToken(t *testing.T) {
	t.Parallel()
	token, prefix := newAPIKeyToken()
	if !apiKeyPattern.MatchString(token) {
		t.Fatalf("token %q does not match the SPEC §5 format", token)
	}
	if got, ok := apiKeyPrefix(token); !ok || got != prefix {
		t.Fatalf("apiKeyPrefix(%q) = %q, %v; want %q", token, got, ok, prefix)
	}
	if other, _ := newAPIKeyToken(); other == token {
		t.Fatal("two tokens are equal")
	}
}

func TestAPIKeyPrefix(t *testing.T) {
	t.Parallel()
	const secret = "abcdefghijklmnopqrstuvwxyzAB-_09" // 32 base64url characters
	tests := []struct {
		name   string
		token  string
		want   string
		wantOK bool
	}{
		{"valid", "svc_live_0123456789abcdef." + secret, "0123456789abcdef", true},
		{"uppercase hex prefix", "svc_live_0123456789ABCDEF." + secret, "", false},
		{"short prefix", "svc_live_0123456789abcde." + secret, "", false},
		{"long prefix", "svc_live_0123456789abcdef0." + secret, "", false},
		{"short secret", "svc_live_0123456789abcdef." + secret[1:], "", false},
		{"long secret", "svc_live_0123456789abcdef." + secret + "A", "", false},
		{"padding in secret", "svc_live_0123456789abcdef." + secret[:31] + "=", "", false},
		{"standard base64 in secret", "svc_live_0123456789abcdef." + secret[:31] + "+", "", false},
		{"test literal", "svc_test_0123456789abcdef." + secret, "", false},
		{"missing dot", "svc_live_0123456789abcdef" + secret, "", false},
		{"trailing newline", "svc_live_0123456789abcdef." + secret + "\n", "", false},
		{"bearer prefix left on", "Bearer svc_live_0123456789abcdef." + secret, "", false},
		{"a JWT", "eyJhbGciOiJIUzI1NiJ9.e30.sig", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := apiKeyPrefix(tt.token)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("apiKeyPrefix(%q) = %q, %v; want %q, %v", tt.token, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRefreshTokenFormat(t *testing.T) {
	t.Parallel()
	token := newRefreshToken()
	if !regexp.MustCompile(`^rt_[A-Za-z0-9_-]{43}$`).MatchString(token) || !validRefreshToken(token) {
		t.Fatalf("refresh token %q has the wrong shape", token)
	}
	for _, bad := range []string{"", "rt_", token + "A", token[:len(token)-1], strings.Replace(token, "rt_", "rf_", 1), token[:10] + "+" + token[11:]} {
		if validRefreshToken(bad) {
			t.Errorf("validRefreshToken(%q) = true", bad)
		}
	}
	if len(tokenHash(token)) != sha256.Size {
		t.Fatal("token hash is not SHA-256")
	}
}

func TestSMTPCredentialFormat(t *testing.T) {
	t.Parallel()
	username, password := newSMTPCredential()
	if !regexp.MustCompile(`^pm_[0-9a-f]{20}$`).MatchString(username) || !validSMTPUsername(username) {
		t.Fatalf("username %q has the wrong shape", username)
	}
	raw, err := base64.RawURLEncoding.DecodeString(password)
	if err != nil || len(raw) != 24 {
		t.Fatalf("password %q is not base64url of 24 bytes", password)
	}
	if h := smtpPasswordHash(password); len(h) != 64 || h != smtpPasswordHash(password) || h == smtpPasswordHash(password+"x") {
		t.Fatalf("smtpPasswordHash(%q) = %q", password, h)
	}
	for _, bad := range []string{"", "pm_", username + "0", strings.ToUpper(username), "svc_" + username[3:]} {
		if validSMTPUsername(bad) {
			t.Errorf("validSMTPUsername(%q) = true", bad)
		}
	}
}

var (
	testAccessKey = []byte("0123456789abcdef0123456789abcdef")
	testNow       = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
)

// signWith signs arbitrary claims with an arbitrary method, for building hostile tokens.
func signWith(tb testing.TB, method jwt.SigningMethod, claims jwt.Claims, key any) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func validClaims(typ string, now time.Time, ttl time.Duration) accessClaims {
	return accessClaims{
		Org: "org-1",
		Typ: typ,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   "user-1",
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
}

// relabel re-signs a token's payload with HMAC-SHA256 under a header naming another algorithm, the classic
// algorithm-confusion attack (RFC 8725 §2.1).
func relabel(tb testing.TB, token, alg string) string {
	tb.Helper()
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `","typ":"JWT"}`))
	payload := strings.Split(token, ".")[1]
	mac := hmac.New(sha256.New, testAccessKey)
	mac.Write([]byte(header + "." + payload))
	return header + "." + payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// flipFirst changes the first character of a base64url string to another one.
func flipFirst(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func TestAccessTokenClaims(t *testing.T) {
	t.Parallel()
	token, err := signAccessToken(testAccessKey, "user-1", "org-1", testNow, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	var header, payload map[string]any
	for i, dst := range []*map[string]any{&header, &payload} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	if header["alg"] != "HS256" {
		t.Fatalf("alg = %v", header["alg"])
	}
	if header["kid"] != secret.KeyID(testAccessKey) {
		t.Fatalf("kid = %v, want the key's id", header["kid"])
	}
	want := map[string]any{
		"sub": "user-1", "org": "org-1", "typ": "access",
		"iat": float64(testNow.Unix()), "exp": float64(testNow.Add(15 * time.Minute).Unix()),
	}
	if len(payload) != len(want) {
		t.Fatalf("payload = %v, want exactly %v", payload, want)
	}
	for k, v := range want {
		if payload[k] != v {
			t.Fatalf("claim %s = %v, want %v", k, payload[k], v)
		}
	}
}

func TestParseAccessToken(t *testing.T) {
	t.Parallel()
	valid, err := signAccessToken(testAccessKey, "user-1", "org-1", testNow, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	tamperedPayload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"user-1","org":"org-2","typ":"access","iat":1795255200,"exp":1795256100}`))

	tests := []struct {
		name    string
		token   string
		at      time.Time
		wantErr bool
	}{
		{name: "valid", token: valid, at: testNow},
		{name: "valid just before expiry", token: valid, at: testNow.Add(15*time.Minute - time.Second)},
		{name: "expired", token: valid, at: testNow.Add(15 * time.Minute), wantErr: true},
		{name: "alg none", token: signWith(t, jwt.SigningMethodNone, validClaims("access", testNow, time.Hour), jwt.UnsafeAllowNoneSignatureType), at: testNow, wantErr: true},
		{name: "alg none without signature", token: strings.Join([]string{base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)), parts[1], ""}, "."), at: testNow, wantErr: true},
		{name: "HS512 with the right key", token: signWith(t, jwt.SigningMethodHS512, validClaims("access", testNow, time.Hour), testAccessKey), at: testNow, wantErr: true},
		{name: "RS256-labelled HMAC", token: relabel(t, valid, "RS256"), at: testNow, wantErr: true},
		{name: "HS256 relabel is still valid", token: relabel(t, valid, "HS256"), at: testNow},
		{name: "tampered payload", token: parts[0] + "." + tamperedPayload + "." + parts[2], at: testNow, wantErr: true},
		{name: "tampered signature", token: parts[0] + "." + parts[1] + "." + flipFirst(parts[2]), at: testNow, wantErr: true},
		{name: "typ refresh", token: signWith(t, jwt.SigningMethodHS256, validClaims("refresh", testNow, time.Hour), testAccessKey), at: testNow, wantErr: true},
		{name: "typ missing", token: signWith(t, jwt.SigningMethodHS256, validClaims("", testNow, time.Hour), testAccessKey), at: testNow, wantErr: true},
		{name: "wrong key", token: signWith(t, jwt.SigningMethodHS256, validClaims("access", testNow, time.Hour), []byte("another key, also 32 bytes long!")), at: testNow, wantErr: true},
		{name: "no exp", token: signWith(t, jwt.SigningMethodHS256, accessClaims{Org: "org-1", Typ: "access", RegisteredClaims: jwt.RegisteredClaims{Subject: "user-1"}}, testAccessKey), at: testNow, wantErr: true},
		{name: "no sub", token: signWith(t, jwt.SigningMethodHS256, accessClaims{Org: "org-1", Typ: "access", RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(testNow.Add(time.Hour))}}, testAccessKey), at: testNow, wantErr: true},
		{name: "no org", token: signWith(t, jwt.SigningMethodHS256, accessClaims{Typ: "access", RegisteredClaims: jwt.RegisteredClaims{Subject: "user-1", ExpiresAt: jwt.NewNumericDate(testNow.Add(time.Hour))}}, testAccessKey), at: testNow, wantErr: true},
		{name: "an API key", token: "svc_live_0123456789abcdef.abcdefghijklmnopqrstuvwxyzAB-_09", at: testNow, wantErr: true},
		{name: "empty", token: "", at: testNow, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sub, org, err := parseAccessToken([][]byte{testAccessKey}, tt.token, tt.at)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseAccessToken accepted %q", tt.token)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseAccessToken: %v", err)
			}
			if sub != "user-1" || org != "org-1" {
				t.Fatalf("parseAccessToken = %q, %q", sub, org)
			}
		})
	}
}
