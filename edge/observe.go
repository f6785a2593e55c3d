package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// requestIDHeader carries the request id in both directions so a client, a proxy and our logs can name the
// same request.
const requestIDHeader = "X-Request-Id"

// saneRequestID bounds what we accept from a client: it lands in our logs and response headers verbatim.
var saneRequestID = regexp.MustCompile(`^[A-Za-z0-9._:+/=-]{1,128}$`)

// requestInfo is what the outer middleware learns about a request before routing; handlers and huma
// middleware read it back from the context.
type requestInfo struct {
	id       string
	clientIP netip.Addr
	logger   *slog.Logger
}

type requestInfoKey struct{}

func infoFrom(ctx context.Context) (requestInfo, bool) {
	info, ok := ctx.Value(requestInfoKey{}).(requestInfo)
	return info, ok
}

// loggerFrom returns the request's logger (which carries request_id), or the default logger outside a
// request.
func loggerFrom(ctx context.Context) *slog.Logger {
	if info, ok := infoFrom(ctx); ok && info.logger != nil {
		return info.logger
	}
	return slog.Default()
}

// httpMetrics are the RED metrics of the edge, labelled by route pattern so that ids in paths cannot blow
// up cardinality.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "postmill_http_requests_total",
		Help: "HTTP requests served by the edge, by route pattern, method and status.",
	}, []string{"route", "method", "status"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "postmill_http_request_duration_seconds",
		Help:    "Time to serve HTTP requests at the edge, by route pattern and method.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route", "method"})
	var err error
	if requests, err = registerOrReuse(reg, requests); err != nil {
		return nil, err
	}
	if duration, err = registerOrReuse(reg, duration); err != nil {
		return nil, err
	}
	return &httpMetrics{requests: requests, duration: duration}, nil
}

// registerOrReuse lets two servers share one registry (tests, or a restart inside one process) by reusing
// the collector registered first.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// knownMethods bounds the method label: anything else a client invents is counted as _OTHER.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func methodLabel(m string) string {
	if knownMethods[m] {
		return m
	}
	return "_OTHER"
}

// unmatchedRoute labels requests that matched no route (404s, mux redirects).
const unmatchedRoute = "unmatched"

// routeOf strips the method from a ServeMux pattern ("POST /v1/api-keys" → "/v1/api-keys"); the catch-all
// "/" is reported as unmatched.
func routeOf(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		pattern = path
	}
	if pattern == "" || pattern == "/" {
		return unmatchedRoute
	}
	return pattern
}

// statusRecorder remembers what the handlers wrote so the access log, metrics and span can report it.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController (and huma's read deadlines) reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush keeps streaming responses streaming through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		if r.status == 0 {
			r.status = http.StatusOK
		}
		f.Flush()
	}
}

// observe wraps every request: request id, client IP, server span, panic recovery, metrics and the
// access log. It never logs headers, bodies or raw paths (paths of public pages carry tokens); it logs the
// route pattern.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if n := s.cfg.InFlight; n != nil {
			n.Add(1)
			defer n.Add(-1)
		}
		id := r.Header.Get(requestIDHeader)
		if !saneRequestID.MatchString(id) {
			id = uuid.NewString()
		}
		w.Header().Set(requestIDHeader, id)

		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()

		ip := s.clientIP(r)
		logger := s.logger.With(slog.String("request_id", id))
		if sc := span.SpanContext(); sc.HasTraceID() {
			logger = logger.With(slog.String("trace_id", sc.TraceID().String()))
		}
		ctx = context.WithValue(ctx, requestInfoKey{}, requestInfo{id: id, clientIP: ip, logger: logger})
		r = r.WithContext(ctx)
		rec := &statusRecorder{ResponseWriter: w}

		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger.Error("panic serving request", slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				if rec.status == 0 {
					writeJSONError(rec, statusProblem(http.StatusInternalServerError, ""))
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			route := routeOf(r.Pattern)
			method := methodLabel(r.Method)
			elapsed := time.Since(start)
			s.metrics.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
			s.metrics.duration.WithLabelValues(route, method).Observe(elapsed.Seconds())

			if route != unmatchedRoute {
				span.SetName(r.Method + " " + route)
				span.SetAttributes(attribute.String("http.route", route))
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			logger.LogAttrs(ctx, slog.LevelInfo, "request",
				slog.String("method", r.Method),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
				slog.Int64("bytes", rec.bytes),
				slog.String("client_ip", ip.String()),
			)
		}()
		next.ServeHTTP(rec, r)
	})
}

// clientIP is the socket peer, unless the peer is a trusted proxy: then it is the right-most
// X-Forwarded-For entry that is not itself a trusted proxy. Entries left of that one were written by the
// client and cannot be believed.
func (s *Server) clientIP(r *http.Request) netip.Addr {
	peer := remoteAddr(r.RemoteAddr)
	if !peer.IsValid() || !s.trusted(peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		addr := parseHop(hops[i])
		if !addr.IsValid() {
			// A garbled entry ends what we can believe; the last trusted hop is the best we know.
			break
		}
		client = addr
		if !s.trusted(addr) {
			break
		}
	}
	return client
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func remoteAddr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// parseHop accepts the forms proxies write: a bare address, or one with a port ("[v6]:port", "v4:port").
func parseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if a := remoteAddr(s); a.IsValid() {
		return a.WithZone("")
	}
	return netip.Addr{}
}

// readiness answers /readyz from a cached check: the last result serves every probe for fresh after it was
// taken, and probes that find it stale share the one check they start. However many probes arrive, the
// check (a database ping through the core) runs at most once per fresh, and a probe waits at most for one
// check. A nil check is always ready.
type readiness struct {
	run   func(context.Context) error
	fresh time.Duration
	now   func() time.Time

	mu      sync.Mutex
	err     error
	at      time.Time     // when the last check ended; zero before the first
	running chan struct{} // closed when the check in flight ends; nil when none is
}

func newReadiness(run func(context.Context) error, fresh time.Duration, now func() time.Time) *readiness {
	return &readiness{run: run, fresh: fresh, now: now}
}

// check returns the last result while it is fresh; otherwise it waits for the check in flight, starting
// one if there is none. The check runs detached from ctx (bounded by readyTimeout), so a probe that gives
// up does not cut it short for the others.
func (r *readiness) check(ctx context.Context) error {
	if r.run == nil {
		return nil
	}
	r.mu.Lock()
	if !r.at.IsZero() && r.now().Sub(r.at) < r.fresh {
		err := r.err
		r.mu.Unlock()
		return err
	}
	done := r.running
	if done == nil {
		done = make(chan struct{})
		r.running = done
		go r.refresh(done)
	}
	r.mu.Unlock()
	select {
	case <-done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *readiness) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	err := r.run(ctx)
	r.mu.Lock()
	r.err, r.at, r.running = err, r.now(), nil
	r.mu.Unlock()
	close(done)
}
