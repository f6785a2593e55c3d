package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/grafana/dskit/services"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/edge/submission"
)

// initEdge runs the public HTTP API and SMTP submission, reaching the core in-process or over Connect.
func (a *App) initEdge() (services.Service, error) {
	var (
		srv     *http.Server
		sub     *submission.Server
		serveCh = make(chan error, 2)
	)
	starting := func(ctx context.Context) error {
		core := a.inProcessCore()
		if !a.targets.Has(TargetCore) {
			core = a.remoteCore(rpc.TierEdge).Core()
		}
		e, err := edge.New(edge.Config{
			TrustedProxies: a.cfg.TrustedProxies,
			Ready:          a.ready,
			Logger:         a.logger,
			Registerer:     a.reg,
			BaseURL:        a.cfg.BaseURL,
			Timeouts:       a.cfg.HTTPTimeouts,
			// POSTMILL_ADMIN_REQUIRE_2FA=false lets admins without 2FA use the admin routes.
			AdminWithout2FA: !a.cfg.AdminRequire2FA,
			RequestLogOff:   !a.cfg.RequestLog,
			InFlight:        &a.inFlight,
		}, core)
		if err != nil {
			return err
		}
		if c := a.localCatcher(); c != nil {
			if err := e.ServeLocal(c); err != nil {
				return err
			}
		}
		ln, err := net.Listen("tcp", a.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("edge listener: %w", err)
		}
		a.mu.Lock()
		a.httpAddr = ln.Addr()
		a.mu.Unlock()
		srv = e.HTTPServer() // the handler with the edge's read, write and idle timeouts
		go func() { serveCh <- srv.Serve(ln) }()
		a.logger.Info("listening", "service", "edge-http", "addr", ln.Addr().String(), "base_url", a.cfg.BaseURL)

		tlsCfg, err := a.submissionTLS()
		if err != nil {
			return err
		}
		sub, err = submission.New(submission.Config{Config: smtpd.Config{
			Addr: a.cfg.SubmissionAddr, TLSConfig: tlsCfg,
			MaxConnections: a.cfg.SubmissionMaxConnections, MaxConnectionsPerIP: a.cfg.SubmissionMaxConnectionsPerIP,
		}}, core, a.logger)
		if err != nil {
			return err
		}
		subAddr, err := sub.Listen()
		if err != nil {
			return fmt.Errorf("submission listener: %w", err)
		}
		a.mu.Lock()
		a.smtpAddr = subAddr
		a.mu.Unlock()
		go func() { serveCh <- sub.Serve() }()
		a.logger.Info("listening", "service", "smtp-submission", "addr", subAddr.String(), "starttls", tlsCfg != nil)
		return nil
	}
	running := untilServeEnds("edge server", serveCh)
	stopping := func(error) error {
		ctx, cancel := context.WithTimeout(context.Background(), a.grace())
		defer cancel()
		var errs []error
		if sub != nil {
			errs = append(errs, sub.Shutdown(ctx))
		}
		if srv != nil {
			errs = append(errs, srv.Shutdown(ctx)) // stops accepting, lets in-flight requests finish
		}
		return errors.Join(errs...)
	}
	return services.NewBasicService(starting, running, stopping).WithName(TargetEdge), nil
}
