package rpc

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"
)

// Client is the core as seen from another tier. Its Core holds a client of every service of the table in
// service.go, each implementing its field's interface by calling a NewHandler over Connect and returning
// the same values and *ports.Error the in-process core would, so the tier is written once for both
// deployments.
type Client struct {
	core ports.Core
}

var _ ports.Pinger = (*Client)(nil)

// NewHTTPClient is the HTTP client NewClient uses when given none, speaking TLS with tlsConfig when it is
// not nil (see ClientTLS; an https base URL with a nil tlsConfig verifies the core against the system's
// roots). It keeps many idle connections per host instead of net/http's two: the edge calls the core on
// almost every request (authentication, rate limits), and re-dialling, let alone a TLS handshake each
// time, would dominate the hop. Over TLS it speaks HTTP/2. It does not ask for compressed responses.
func NewHTTPClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSClientConfig:       tlsConfig,
			TLSHandshakeTimeout:   5 * time.Second,
			ExpectContinueTimeout: time.Second,
			// No transparent gzip either (see NewClient).
			DisableCompression: true,
		},
	}
}

// NewClient calls the handler served at baseURL (such as https://core:8081), presenting credential, the
// calling tier's (Credential), on every call; the core refuses the procedures that tier may not call.
// A nil httpClient means NewHTTPClient(nil): up to 256 idle connections to the core, and a 30-second
// timeout bounding a call whose caller set no deadline. Messages up to MaxMessageBytes go either way, as
// the handler allows.
func NewClient(baseURL, credential string, httpClient connect.HTTPClient) *Client {
	if httpClient == nil {
		httpClient = NewHTTPClient(nil)
	}
	env := clientEnv{
		httpClient: httpClient,
		baseURL:    baseURL,
		opts: []connect.ClientOption{
			connect.WithInterceptors(clientInterceptors(credential)...),
			connect.WithReadMaxBytes(MaxMessageBytes),
			connect.WithSendMaxBytes(MaxMessageBytes),
			// Responses come uncompressed: tiers talk over a local network, where gzip costs more CPU
			// than the bytes it saves (a batch of outbound messages is compressed by the core and
			// inflated by the MTA for every job).
			connect.WithAcceptCompression("gzip", nil, nil),
		},
	}
	c := &Client{}
	for _, s := range services {
		s.fill(&c.core, env)
	}
	return c
}

// Core is every interface of ports.Core served by its client, ready to hand to a tier in place of the
// in-process core.
func (c *Client) Core() ports.Core {
	return c.core
}

// Ping implements ports.Pinger as Core().Health does, so that a process which does not run the core can
// hold the Client itself as its readiness check.
func (c *Client) Ping(ctx context.Context) error {
	return c.core.Health.Ping(ctx)
}

// call sends msg through send, one method of a generated client, and converts the answer with from. A
// failure comes back as fromConnectError makes it, beside the zero value, which is what the in-process
// core's method would have returned.
func call[Req, Res, T any](ctx context.Context, procedure string, send func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req, from func(*Res) T) (T, error) {
	res, err := send(ctx, connect.NewRequest(msg))
	if err != nil {
		var zero T
		return zero, fromConnectError(procedure, err)
	}
	return from(res.Msg), nil
}

// exec is call for a method whose only result is its error.
func exec[Req, Res any](ctx context.Context, procedure string, send func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) error {
	_, err := send(ctx, connect.NewRequest(msg))
	return fromConnectError(procedure, err)
}

// pick is call's usual from: the one field of a response that get reads, converted by from.
func pick[Res, W, T any](get func(*Res) W, from func(W) T) func(*Res) T {
	return func(r *Res) T { return from(get(r)) }
}
