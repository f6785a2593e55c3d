package rpc

import (
	"context"
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

// defaultHTTPClient keeps many idle connections per host instead of net/http's two: the edge calls the
// core on almost every request (authentication, rate limits), and re-dialling would dominate the hop.
func defaultHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
	}
}

// NewClient calls the handler served at baseURL (such as http://core:8081), presenting token as the
// inter-tier credential. A nil httpClient means one whose transport keeps up to 256 idle connections
// to the core, because the edge calls it on almost every request, and whose 30-second timeout bounds a
// call whose caller set no deadline. Messages up to MaxMessageBytes go either way, as the handler allows.
func NewClient(baseURL, token string, httpClient connect.HTTPClient) *Client {
	if httpClient == nil {
		httpClient = defaultHTTPClient()
	}
	env := clientEnv{
		httpClient: httpClient,
		baseURL:    baseURL,
		opts: []connect.ClientOption{
			connect.WithInterceptors(clientInterceptors(token)...),
			connect.WithReadMaxBytes(MaxMessageBytes),
			connect.WithSendMaxBytes(MaxMessageBytes),
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
