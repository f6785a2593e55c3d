package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/postmill/postmill/ports"
)

// Request log capture. Every /v1 request an organization makes (apart from reading the logs and analytics
// themselves) becomes a ports.RequestLog: captureRequests tees the first bytes of both bodies, notePrincipal
// records who the guard authenticated, and the row is offered to a bounded buffer that a goroutine ships in
// batches through ports.LogService.RecordRequests. Offering never blocks: when the buffer is full the row
// is dropped and counted, so the request log can never slow a request down.

const (
	// logBuffer is how many captured rows wait for the shipper at most.
	logBuffer = 10000
	// logBatch is the most rows one RecordRequests call carries.
	logBatch = 500
	// logFlush is how long a captured row waits at most before its batch is shipped.
	logFlush = time.Second
	// logShipTimeout bounds one RecordRequests call.
	logShipTimeout = 10 * time.Second
)

// redacted replaces the value of every secret-bearing field of a logged body.
const redacted = "[redacted]"

type captured struct{ principal ports.Principal }

type captureKey struct{}

// notePrincipal is the huma middleware, after the guard, that tells the capture who made the request.
func (s *Server) notePrincipal(ctx huma.Context, next func(huma.Context)) {
	if c, ok := ctx.Context().Value(captureKey{}).(*captured); ok {
		c.principal = principalFrom(ctx.Context())
	}
	next(ctx)
}

// logShipper is the bounded buffer between captured requests and the analytics store.
type logShipper struct {
	rows    chan ports.RequestLog
	send    func(context.Context, []ports.RequestLog) error
	dropped prometheus.Counter
	shipped prometheus.Counter
	failed  prometheus.Counter
}

func (s *Server) startLogShipper() {
	reg := s.cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	counter := func(name, help string) prometheus.Counter {
		c, err := registerOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
		if err != nil {
			return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		}
		return c
	}
	sh := &logShipper{
		rows:    make(chan ports.RequestLog, logBuffer),
		send:    s.core.Logs.RecordRequests,
		dropped: counter("postmill_request_logs_dropped_total", "Captured API requests dropped because the request log buffer was full."),
		shipped: counter("postmill_request_logs_shipped_total", "Captured API requests stored in the request log."),
		failed:  counter("postmill_request_logs_failed_total", "Captured API requests lost because storing their batch failed."),
	}
	s.logs = sh
	go sh.run(s)
}

// offer hands a row to the shipper without ever waiting.
func (sh *logShipper) offer(r ports.RequestLog) {
	select {
	case sh.rows <- r:
	default:
		sh.dropped.Inc()
	}
}

// run ships batches for the life of the process: a batch goes when it holds logBatch rows or its first
// row has waited logFlush. A batch whose store call fails is counted and dropped: the request log is best
// effort and never holds memory for a store that is down.
func (sh *logShipper) run(s *Server) {
	batch := make([]ports.RequestLog, 0, logBatch)
	for first := range sh.rows {
		batch = append(batch[:0], first)
		deadline := time.NewTimer(logFlush)
	fill:
		for len(batch) < logBatch {
			select {
			case r := <-sh.rows:
				batch = append(batch, r)
			case <-deadline.C:
				break fill
			}
		}
		deadline.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), logShipTimeout)
		err := sh.send(ctx, batch)
		cancel()
		if err != nil {
			sh.failed.Add(float64(len(batch)))
			s.logger.Warn("request log batch lost", "rows", len(batch), "error", err.Error())
			continue
		}
		sh.shipped.Add(float64(len(batch)))
	}
}

// captureRequests is the HTTP middleware, inside observe, that builds the request log rows.
func (s *Server) captureRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.logs == nil || !strings.HasPrefix(r.URL.Path, "/v1/") || strings.HasPrefix(r.URL.Path, "/v1/logs") ||
			strings.HasPrefix(r.URL.Path, "/v1/analytics") {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		c := &captured{}
		in := &boundedBuffer{limit: ports.MaxLoggedBody}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &teeBody{ReadCloser: r.Body, buf: in}
		}
		out := &captureWriter{ResponseWriter: w, buf: boundedBuffer{limit: ports.MaxLoggedBody}}
		outer := r
		r = r.WithContext(context.WithValue(r.Context(), captureKey{}, c))
		next.ServeHTTP(out, r)
		// The mux records the matched pattern on the request it served; observe, outside, labels its
		// metrics and traces by it, so hand it back.
		outer.Pattern = r.Pattern
		p := c.principal
		if p.OrganizationID == "" {
			return
		}
		status := out.status
		if status == 0 {
			status = http.StatusOK
		}
		row := ports.RequestLog{
			ID: newLogID(), OrganizationID: p.OrganizationID, OccurredAt: start.UTC(),
			Method: r.Method, Route: routeOf(r.Pattern), Path: r.URL.Path, Status: status,
			Latency: time.Since(start), UserAgent: truncate(r.UserAgent(), 512),
			RequestBody:  loggedBody(in, r.Header.Get("Content-Type")),
			ResponseBody: loggedBody(&out.buf, out.Header().Get("Content-Type")),
		}
		if p.Kind == ports.PrincipalAPIKey {
			row.APIKeyID = p.APIKeyID
		} else {
			row.UserID = p.UserID
		}
		if info, ok := infoFrom(r.Context()); ok {
			row.RequestID, row.ClientIP = info.id, truncatedIP(info.clientIP)
		}
		s.logs.offer(row)
	})
}

func newLogID() string {
	if id, err := uuid.NewV7(); err == nil {
		return id.String()
	}
	return uuid.NewString()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// truncatedIP keeps the network of an address: its /24 for IPv4, its /48 for IPv6.
func truncatedIP(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return ""
	}
	return p.Addr().String()
}

// boundedBuffer keeps the first limit bytes written to it and counts them all.
type boundedBuffer struct {
	bytes.Buffer
	limit int
	total int64
}

func (b *boundedBuffer) keep(p []byte) {
	b.total += int64(len(p))
	if room := b.limit + 1 - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
}

type teeBody struct {
	io.ReadCloser
	buf *boundedBuffer
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.buf.keep(p[:n])
	return n, err
}

type captureWriter struct {
	http.ResponseWriter
	buf    boundedBuffer
	status int
}

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.buf.keep(p[:n])
	return n, err
}

func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *captureWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// loggedBody is what the log keeps of a body: "" for none, the JSON with every secret-bearing value
// replaced, or a placeholder naming the size for a body that is longer than the bound or not JSON.
func loggedBody(b *boundedBuffer, contentType string) string {
	if b.total == 0 {
		return ""
	}
	if b.total > int64(b.limit) {
		return fmt.Sprintf("[%d bytes, over the %d-byte limit of the log]", b.total, b.limit)
	}
	dec := json.NewDecoder(bytes.NewReader(b.Bytes()))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		if contentType == "" {
			contentType = "unknown type"
		}
		return fmt.Sprintf("[%d bytes of %s]", b.total, strings.SplitN(contentType, ";", 2)[0])
	}
	out, err := json.Marshal(redact(v))
	if err != nil {
		return fmt.Sprintf("[%d bytes]", b.total)
	}
	return string(out)
}

// secretFields are the lower-cased keys, without "_" and "-", whose values never reach the log; a key
// containing one of secretParts is redacted too.
var (
	secretFields = map[string]bool{"code": true, "otp": true, "totp": true, "key": true, "authorization": true,
		"content": true, "recoverycodes": true}
	secretParts = []string{"password", "secret", "token", "apikey", "privatekey", "credential", "otpauth"}
)

// isSecretValue reports whether a string carries a secret whatever its field is called: an otpauth:// URL
// (its secret= parameter is the TOTP seed), a URL with a password in its userinfo (a webhook receiver's
// HTTP Basic credentials), or any URL with a secret, token or password parameter.
func isSecretValue(s string) bool {
	l := strings.ToLower(s)
	if strings.HasPrefix(strings.TrimSpace(l), "otpauth:") {
		return true
	}
	if maskURLPassword(s) != s {
		return true
	}
	_, query, ok := strings.Cut(l, "?")
	if !ok {
		return false
	}
	for param := range strings.SplitSeq(query, "&") {
		name, _, _ := strings.Cut(param, "=")
		if isSecretField(name) {
			return true
		}
	}
	return false
}

// fieldSeparators folds api_key, api-key and apiKey to one spelling; a Replacer is safe for concurrent use
// and builds its tables once.
var fieldSeparators = strings.NewReplacer("_", "", "-", "")

func isSecretField(k string) bool {
	k = fieldSeparators.Replace(strings.ToLower(k))
	if secretFields[k] {
		return true
	}
	for _, p := range secretParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

func redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if isSecretField(k) {
				t[k] = redacted
			} else {
				t[k] = redact(x)
			}
		}
	case []any:
		for i, x := range t {
			t[i] = redact(x)
		}
	case string:
		if isSecretValue(t) {
			return redacted
		}
	}
	return v
}
