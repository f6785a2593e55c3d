package edge

import "net/http"

// contentSecurityPolicy is the policy of every response, written for the HTML ones (the API reference at
// /docs today, the public /p/* pages later) and harmless on JSON. Everything comes from the edge's own
// origin: the viewer's script and stylesheet are embedded files, the page starts it from a file rather than
// an inline script, and the OpenAPI document and "Try it out" requests go to the same origin. Swagger UI
// needs no eval and no inline <script> or <style>; its icons are data: SVG images, hence img-src data:.
// Nothing may frame the pages (frame-ancestors, and X-Frame-Options for older browsers), no plugin may
// load, and forms post only to the edge. A handler that needs another policy sets its own header.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders sets the browser-facing headers on every response before the handler runs. Besides the
// policy: X-Frame-Options DENY, nosniff so a JSON or text body is never run as a script or page, and
// Referrer-Policy no-referrer so token-bearing URLs (/p/* links, tracking redirects) do not leak to the
// sites a page links to.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
