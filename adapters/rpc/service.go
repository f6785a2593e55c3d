package rpc

import (
	"log/slog"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"
)

// service is one row of the table NewHandler and NewClient are built from: a Connect service of proto/,
// the fields of ports.Core it carries and the tiers that may call it. Neither function names a service;
// each area's file registers the services of its proto package from init, so a new service is a new
// proto and a new file.
type service struct {
	// name is the service's full name (the generated <Service>Name constant), which its allow-list row
	// is kept under.
	name string
	// tiers are the tiers whose credentials may call the service. Each row names what the tier's code
	// uses and nothing more: the edge serves the tenant API and the public pages, the MTA loads what it
	// signs and reports outcomes, the inbound tier asks about recipients and records feedback, and every
	// tier asks for health to answer its own readiness.
	tiers []Tier
	// procedureTiers overrides tiers for single procedures ("/package.Service/Method"): such a procedure
	// is called by the tiers of its entry, none when the entry is empty.
	procedureTiers map[string][]Tier
	// mount returns the service's path and its handler serving what core offers, or ok false when core
	// offers none of it, which leaves the service unmounted.
	mount func(core ports.Core, env handlerEnv) (path string, h http.Handler, ok bool)
	// fill sets the fields of core that the service's client implements.
	fill func(core *ports.Core, env clientEnv)
}

// calledBy names the row's service and the tiers that may call it. A row without it is called by no
// tier, and TestEveryServiceHasCallers fails.
func (s service) calledBy(name string, tiers ...Tier) service {
	s.name, s.tiers = name, tiers
	return s
}

// procedureCalledBy lets exactly tiers call procedure, one of the row's service, whatever the service's
// tiers are; with no tiers, no tier may call it.
func (s service) procedureCalledBy(procedure string, tiers ...Tier) service {
	m := make(map[string][]Tier, len(s.procedureTiers)+1)
	for p, t := range s.procedureTiers {
		m[p] = t
	}
	m[procedure] = tiers
	s.procedureTiers = m
	return s
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

// allowList is the allow-list the server's authentication enforces (mayCall), gathered from the table on
// first use, after every init has run: for each service its row's tiers, and for each procedure with tiers
// of its own those. A service or procedure without an entry is called by no tier.
var allowList = sync.OnceValue(func() map[string][]Tier {
	m := map[string][]Tier{}
	for _, s := range services {
		m[s.name] = s.tiers
		for p, t := range s.procedureTiers {
			m[p] = t
		}
	}
	return m
})

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
