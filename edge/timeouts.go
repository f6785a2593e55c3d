package edge

import (
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// Defaults of Timeouts.
const (
	// DefaultReadHeaderTimeout bounds the wait for a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds a whole request, headers and body, on routes whose body bound is small: a
	// 1 MiB JSON body needs a client sending 17 KiB/s or more.
	DefaultReadTimeout = 60 * time.Second
	// DefaultWriteTimeout bounds the time from the end of the request headers to the end of the answer on
	// routes without a body, and the time after the body on routes with one: every handler answers in
	// seconds, and the largest answers (the OpenAPI document, a page of a list) reach a client reading at
	// 10 KiB/s in time.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout is how long a kept-alive connection waits for its next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMinBodyRate is the slowest upload the large-body routes allow for, 64 KiB/s (about half a
	// megabit per second): a body at SendMaxBodyBytes or BatchMaxBodyBytes may take 16 seconds per MiB of
	// its bound (a 40 MiB send from such a link takes about 11 minutes), and a 4 MiB template version 64 s.
	DefaultMinBodyRate int64 = 64 << 10
)

// Timeouts bound how long the edge's HTTP server waits for each part of a request and takes to answer, so
// that a client trickling its headers or body, or never reading the answer, holds a connection only so
// long. Each route's body gets the time its size bound needs at MinBodyRate, never less than Read: the
// send routes allow tens of MiB from a slow link, the others are cut off after Read. Zero fields take the
// defaults.
type Timeouts struct {
	// ReadHeader bounds the wait for the request headers (DefaultReadHeaderTimeout).
	ReadHeader time.Duration
	// Read bounds a request of a route without a large body, headers included (DefaultReadTimeout).
	Read time.Duration
	// Write bounds the answer: from the end of the headers on routes without a body, from the end of the
	// body's time on routes with one (DefaultWriteTimeout).
	Write time.Duration
	// Idle bounds the wait between requests on a kept-alive connection (DefaultIdleTimeout).
	Idle time.Duration
	// MinBodyRate is the upload speed, in bytes per second, a route's largest body is given time for
	// (DefaultMinBodyRate).
	MinBodyRate int64
}

func (t Timeouts) withDefaults() Timeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = DefaultReadHeaderTimeout
	}
	if t.Read <= 0 {
		t.Read = DefaultReadTimeout
	}
	if t.Write <= 0 {
		t.Write = DefaultWriteTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	if t.MinBodyRate <= 0 {
		t.MinBodyRate = DefaultMinBodyRate
	}
	return t
}

// bodyTime is how long a route whose bodies may reach maxBytes waits for its body: the time maxBytes takes
// at MinBodyRate, at least Read.
func (t Timeouts) bodyTime(maxBytes int64) time.Duration {
	d := time.Duration(float64(maxBytes) / float64(t.MinBodyRate) * float64(time.Second))
	return max(d, t.Read)
}

// HTTPServer returns the http.Server to put on the public listener: the edge's handler with Timeouts.
// The server-wide read and write timeouts fit routes without a large body; the routes with one extend
// both deadlines for their own requests (see bodyDeadlines).
func (s *Server) HTTPServer() *http.Server {
	t := s.cfg.Timeouts
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
}

// sizeBodyTimeouts gives every operation with a body the time its size bound needs (bodyTime) instead of
// huma's fixed five seconds, in which a send of tens of MiB could not arrive over a slow link. huma sets
// the connection's read deadline to it when it starts reading the body. It runs as the operation is added,
// after register has set the operation's MaxBodyBytes.
func (s *Server) sizeBodyTimeouts(_ *huma.OpenAPI, op *huma.Operation) {
	if op.BodyReadTimeout > 0 {
		op.BodyReadTimeout = s.cfg.Timeouts.bodyTime(op.MaxBodyBytes)
	}
}

// bodyDeadlines moves the write deadline of a request to an operation with a body past the time its body
// may take: the server-wide WriteTimeout counts from the end of the headers, and a large upload from a
// slow link would otherwise leave no time to answer it.
func (s *Server) bodyDeadlines(ctx huma.Context, next func(huma.Context)) {
	if op := ctx.Operation(); op.BodyReadTimeout > 0 {
		_, w := humago.Unwrap(ctx)
		// An error means the connection cannot take deadlines (a test recorder); the server-wide one stays.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(op.BodyReadTimeout + s.cfg.Timeouts.Write))
	}
	next(ctx)
}
