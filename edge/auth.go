package edge

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// apiKeyPrefix is the fixed literal every API key starts with (SPEC §5 rule 2); it tells an API key from a
// session JWT without asking the core.
const apiKeyPrefix = "svc_live_"

// Security scheme names in the OpenAPI document.
const (
	securitySession = "session"
	securityAPIKey  = "apiKey"
)

// authKind is how an operation authenticates (SPEC §5).
type authKind int

const (
	// authUnset is the zero value: an operation that declares no rule is refused, so a route can never
	// become public by omission.
	authUnset authKind = iota
	authPublic
	authSession
	authKey
	authAdmin
)

// access is an operation's authentication rule, kept in huma operation metadata so that one middleware
// enforces every route and the rule sits next to the route's declaration.
type access struct {
	kind authKind
	// scopes are alternatives for Key routes: any one of them suffices (SPEC §5 rule 9).
	scopes []string
}

// rateLimit is a per-client-IP fixed-window limit (SPEC §8).
type rateLimit struct {
	key    string
	limit  int
	window time.Duration
}

// Operation metadata keys.
const (
	metaAccess    = "postmill.access"
	metaRateLimit = "postmill.rateLimit"
)

type principalKey struct{}

// principalFrom returns the caller the guard authenticated. Handlers take organization ids only from it,
// never from a body or query string (SPEC §5 rule 1).
func principalFrom(ctx context.Context) ports.Principal {
	p, _ := ctx.Value(principalKey{}).(ports.Principal)
	return p
}

// guard is the huma middleware that enforces each operation's rate limit and authentication before the
// body is read, so unauthenticated callers cannot make the edge decode or validate anything.
func (s *Server) guard(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if rl, ok := op.Metadata[metaRateLimit].(rateLimit); ok {
		if err := s.allow(ctx.Context(), rl); err != nil {
			s.writeError(ctx, err)
			return
		}
	}
	a, _ := op.Metadata[metaAccess].(access)
	if a.kind == authUnset {
		s.writeError(ctx, fmt.Errorf("operation %s declares no access rule", op.OperationID))
		return
	}
	if a.kind == authPublic {
		next(ctx)
		return
	}
	p, err := s.authenticate(ctx.Context(), ctx.Header("Authorization"), a)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// writeError answers with the SPEC §7 body of err through huma's error hook, so middleware errors take
// the same path (and the same logging of internal errors) as handler errors.
func (s *Server) writeError(ctx huma.Context, err error) {
	_ = huma.WriteErr(s.api, ctx, http.StatusInternalServerError, "", err)
}

// allow counts the request against the client IP's window.
func (s *Server) allow(ctx context.Context, rl rateLimit) error {
	ip := "unknown"
	if info, ok := infoFrom(ctx); ok && info.clientIP.IsValid() {
		ip = rateLimitSubject(info.clientIP)
	}
	d, err := s.core.RateLimiter.Allow(ctx, rl.key+":"+ip, rl.limit, rl.window)
	if err != nil {
		return err
	}
	if !d.Allowed {
		return ports.RateLimited(int(math.Ceil(d.RetryAfter.Seconds())))
	}
	return nil
}

// ipv6SubjectBits is the IPv6 prefix a per-IP limit counts as one client. A single subscriber is routinely
// given a whole /64 (RFC 6177), so counting each address separately would give one client 2^64 windows.
const ipv6SubjectBits = 64

// rateLimitSubject is what a per-IP limit counts: an IPv4 address (IPv4-mapped IPv6 included) as itself, an
// IPv6 address as its /64.
func rateLimitSubject(ip netip.Addr) string {
	ip = ip.Unmap()
	if !ip.Is6() {
		return ip.String()
	}
	p, err := ip.WithZone("").Prefix(ipv6SubjectBits)
	if err != nil {
		return ip.String()
	}
	return p.String()
}

// msgAdmin2FA answers an admin whose account has no two-factor authentication, when Config.AdminWithout2FA
// is off (POSTMILL_ADMIN_REQUIRE_2FA, the default).
const msgAdmin2FA = "Platform admin routes require two-factor authentication: enable it for this account with " +
	"POST /v1/auth/2fa/enroll and /v1/auth/2fa/verify"

// authenticate reads only `Authorization: Bearer <token>` (SPEC §5: no query parameter, basic auth or
// cookie) and checks the credential kind before the core sees the token, so an API key never reaches
// session verification and a JWT never reaches key lookup.
func (s *Server) authenticate(ctx context.Context, header string, a access) (ports.Principal, error) {
	token, ok := bearerToken(header)
	if !ok {
		return ports.Principal{}, ports.Unauthenticated("Missing or malformed Authorization bearer token")
	}
	switch a.kind {
	case authKey:
		if !strings.HasPrefix(token, apiKeyPrefix) {
			return ports.Principal{}, ports.Unauthenticated("This route requires an API key")
		}
		p, err := s.core.Auth.AuthenticateAPIKey(ctx, token)
		if err != nil {
			return ports.Principal{}, err
		}
		if p.Kind != ports.PrincipalAPIKey || p.OrganizationID == "" {
			return ports.Principal{}, ports.Unauthenticated("Invalid API key")
		}
		if len(a.scopes) > 0 && !p.HasAnyScope(a.scopes...) {
			return ports.Principal{}, ports.InsufficientScope(slices.Clone(a.scopes))
		}
		return p, nil
	case authSession, authAdmin:
		if strings.HasPrefix(token, apiKeyPrefix) || !looksLikeJWT(token) {
			return ports.Principal{}, ports.Unauthenticated("This route requires a session access token")
		}
		p, err := s.core.Auth.AuthenticateSession(ctx, token)
		if err != nil {
			return ports.Principal{}, err
		}
		if p.Kind != ports.PrincipalSession {
			return ports.Principal{}, ports.Unauthenticated("Invalid session access token")
		}
		if a.kind == authAdmin && !p.IsAdmin {
			return ports.Principal{}, ports.Errorf(ports.CodePermissionDenied, "Platform admin required")
		}
		// Admin power over every tenant is worth a second factor: a stolen password alone must not be enough.
		if a.kind == authAdmin && !p.TwoFactor && !s.cfg.AdminWithout2FA {
			return ports.Principal{}, ports.Errorf(ports.CodePermissionDenied, msgAdmin2FA)
		}
		return p, nil
	}
	return ports.Principal{}, ports.Unauthenticated("Unsupported authentication")
}

// bearerToken extracts the token of an RFC 6750 §2.1 header; the scheme name is case-insensitive.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// looksLikeJWT checks the compact serialisation shape (RFC 7519 §3): three non-empty base64url segments.
func looksLikeJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, c := range p {
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// register declares an operation with its authentication rule, the matching OpenAPI security
// requirement, the error statuses it can answer and the body bound, then hands it to huma. An operation
// that sets MaxBodyBytes (the send routes) gets that bound or Config.MaxBodyBytes, whichever is larger.
func register[I, O any](s *Server, op huma.Operation, a access, h func(context.Context, *I) (*O, error), errs ...int) {
	if a.kind == authUnset {
		panic("edge: operation " + op.OperationID + " declares no access rule")
	}
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[metaAccess] = a
	// huma rejects a body whose length reaches its limit; one more byte lets exactly the bound through.
	op.MaxBodyBytes = max(s.cfg.MaxBodyBytes, op.MaxBodyBytes) + 1
	switch a.kind {
	case authSession:
		op.Security = []map[string][]string{{securitySession: {}}}
		errs = append(errs, http.StatusUnauthorized)
	case authAdmin:
		op.Security = []map[string][]string{{securitySession: {}}}
		errs = append(errs, http.StatusUnauthorized, http.StatusForbidden)
	case authKey:
		op.Security = []map[string][]string{{securityAPIKey: slices.Clone(a.scopes)}}
		errs = append(errs, http.StatusUnauthorized, http.StatusForbidden)
	}
	if _, ok := op.Metadata[metaRateLimit]; ok {
		errs = append(errs, http.StatusTooManyRequests)
	}
	errs = append(errs, http.StatusInternalServerError)
	slices.Sort(errs)
	op.Errors = slices.Compact(errs)
	huma.Register(s.api, op, h)
}
