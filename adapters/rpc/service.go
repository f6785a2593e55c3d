package rpc

import (
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"
)

// service is one row of the table NewHandler and NewClient are built from: a Connect service of proto/
// and the fields of ports.Core it carries. Neither function names a service; each area's file registers
// the services of its proto package from init, so a new service is a new proto and a new file.
type service struct {
	// mount returns the service's path and its handler serving what core offers, or ok false when core
	// offers none of it, which leaves the service unmounted.
	mount func(core ports.Core, env handlerEnv) (path string, h http.Handler, ok bool)
	// fill sets the fields of core that the service's client implements.
	fill func(core *ports.Core, env clientEnv)
}

// handlerEnv is what every service's handler is built with.
type handlerEnv struct {
	log  *slog.Logger
	opts []connect.HandlerOption
}

// clientEnv is what every service's generated client is built with.
type clientEnv struct {
	httpClient connect.HTTPClient
	baseURL    string
	opts       []connect.ClientOption
}

// services is the table. The areas' init functions fill it before main runs; after that it is only read.
var services []service

// register adds rows to the table; only init functions call it.
func register(rows ...service) {
	services = append(services, rows...)
}

// portService is the row of a service that carries exactly one field of ports.Core, which field points
// at. newHandler and newClient are the generated constructors; newServer wraps the field's value in the
// generated handler interface, and newPortClient wraps the generated client in the field's interface.
// The service is mounted when the field is set.
func portService[P, H, C any](
	field func(*ports.Core) *P,
	newHandler func(H, ...connect.HandlerOption) (string, http.Handler),
	newServer func(P, *slog.Logger) H,
	newClient func(connect.HTTPClient, string, ...connect.ClientOption) C,
	newPortClient func(C) P,
) service {
	return service{
		mount: func(core ports.Core, env handlerEnv) (string, http.Handler, bool) {
			port := *field(&core)
			// P is an interface type: a nil field converts to a nil any.
			if any(port) == nil {
				return "", nil, false
			}
			path, h := newHandler(newServer(port, env.log), env.opts...)
			return path, h, true
		},
		fill: func(core *ports.Core, env clientEnv) {
			*field(core) = newPortClient(newClient(env.httpClient, env.baseURL, env.opts...))
		},
	}
}
