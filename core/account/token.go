package account

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postmill/postmill/core/secret"
)

// Credential formats. The API key format is SPEC §5 rule 2; the others are Postmill's own and are recognisable
// by prefix in logs and secret scanners.
const (
	apiKeyLiteral        = "svc_live_"
	apiKeyPrefixLen      = 16 // hex of 8 random bytes
	refreshTokenLiteral  = "rt_"
	smtpUsernameLiteral  = "pm_"
	accessTokenType      = "access"
	accessTokenAlgorithm = "HS256"
	// AccessKeyPurpose is the Keyring.Derive purpose of the key that signs access tokens.
	AccessKeyPurpose = "jwt-access"
)

var (
	apiKeyPattern       = regexp.MustCompile(`^svc_live_[0-9a-f]{16}\.[A-Za-z0-9_-]{32}$`)
	refreshTokenPattern = regexp.MustCompile(`^rt_[A-Za-z0-9_-]{43}$`)
	smtpUsernamePattern = regexp.MustCompile(`^pm_[0-9a-f]{20}$`)
)

// newAPIKeyToken makes svc_live_<16 hex>.<32 base64url>: the prefix (8 random bytes) is the lookup handle shown
// in listings, the secret (24 random bytes, 192 bits) is what makes the token unguessable.
func newAPIKeyToken() (token, prefix string) {
	prefix = hex.EncodeToString(randomBytes(8))
	return apiKeyLiteral + prefix + "." + base64.RawURLEncoding.EncodeToString(randomBytes(24)), prefix
}

// apiKeyPrefix checks a presented token's shape and returns its lookup prefix. Malformed tokens never reach
// the store.
func apiKeyPrefix(token string) (string, bool) {
	if !apiKeyPattern.MatchString(token) {
		return "", false
	}
	return token[len(apiKeyLiteral) : len(apiKeyLiteral)+apiKeyPrefixLen], true
}

// newRefreshToken makes rt_<base64url of 32 random bytes>. It is opaque: all meaning lives in the stored row.
func newRefreshToken() string {
	return refreshTokenLiteral + base64.RawURLEncoding.EncodeToString(randomBytes(32))
}

func validRefreshToken(token string) bool { return refreshTokenPattern.MatchString(token) }

// newSMTPCredential makes a pm_<20 hex> username and a password of 24 random bytes in base64url.
func newSMTPCredential() (username, password string) {
	return smtpUsernameLiteral + hex.EncodeToString(randomBytes(10)), base64.RawURLEncoding.EncodeToString(randomBytes(24))
}

func validSMTPUsername(u string) bool { return smtpUsernamePattern.MatchString(u) }

// tokenHash is the SHA-256 stored for API keys and refresh tokens. These tokens carry 192 or 256 random bits,
// so a fast hash is enough: there is nothing to brute-force that a slow hash would protect.
func tokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// accessClaims is the whole payload of an access token (SPEC §5 rule 6): sub, org and typ, plus iat and exp
// (RFC 7519 §4.1). No role claim: an admin's status is read from the user row on every request.
type accessClaims struct {
	Org string `json:"org"`
	Typ string `json:"typ"`
	jwt.RegisteredClaims
}

var errInvalidAccessToken = errors.New("invalid access token")

// signAccessToken issues an HS256 access token. One algorithm, one key per purpose (RFC 8725 §3.1, §3.9). The
// kid header (RFC 7515 §4.1.4) is secret.KeyID of the key, so that after POSTMILL_SECRET_KEY rotates, tokens
// signed under the previous master are checked against its key rather than failing.
func signAccessToken(key []byte, userID, orgID string, now time.Time, ttl time.Duration) (string, error) {
	claims := accessClaims{
		Org: orgID,
		Typ: accessTokenType,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   userID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	token.Header["kid"] = secret.KeyID(key)
	return token.SignedString(key)
}

// parseAccessToken verifies an access token at now and returns its subject and organization. It pins the
// algorithm to HS256 instead of trusting the header (RFC 8725 §2.1, §3.1: "none" and algorithm substitution),
// requires exp (RFC 7519 §4.1.4) and rejects any typ but access, so a token minted for another purpose with
// the same format cannot stand in for a session (RFC 8725 §3.11). keys are every master's access key, the
// primary's first: the token's kid picks those it is checked against, and a token without a kid (signed
// before tokens named their key) is checked against each.
func parseAccessToken(keys [][]byte, token string, now time.Time) (userID, orgID string, err error) {
	var claims accessClaims
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{accessTokenAlgorithm}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	_, err = parser.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodHS256 {
			return nil, errInvalidAccessToken
		}
		kid, _ := t.Header["kid"].(string)
		var set jwt.VerificationKeySet
		for _, k := range keys {
			if kid == "" || secret.KeyID(k) == kid {
				set.Keys = append(set.Keys, k)
			}
		}
		if len(set.Keys) == 0 {
			return nil, errInvalidAccessToken
		}
		return set, nil
	})
	if err != nil {
		return "", "", errInvalidAccessToken
	}
	if claims.Typ != accessTokenType || claims.Subject == "" || claims.Org == "" {
		return "", "", errInvalidAccessToken
	}
	return claims.Subject, claims.Org, nil
}
