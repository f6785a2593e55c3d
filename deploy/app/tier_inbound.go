package app

import (
	"context"
	"fmt"

	"github.com/grafana/dskit/services"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/inbound"
)

// initInbound runs the MX listener (POSTMILL_SMTP_ADDR) for bounces, feedback reports and mail to customers'
// inbound domains, reaching the core in-process or over Connect.
func (a *App) initInbound() (services.Service, error) {
	var (
		srv     *inbound.Server
		serveCh = make(chan error, 1)
	)
	starting := func(ctx context.Context) error {
		core := a.inProcessCore()
		if !a.targets.Has(TargetCore) {
			core = a.remoteCore(rpc.TierInbound).Core()
		}
		tlsConfig, err := a.cfg.Inbound.tlsConfig()
		if err != nil {
			return err
		}
		srv, err = inbound.New(inbound.Config{Config: smtpd.Config{
			Addr: a.cfg.SMTPAddr, Domain: a.cfg.InboundMXHost, TLSConfig: tlsConfig,
			MaxConnections: a.cfg.SMTPMaxConnections, MaxConnectionsPerIP: a.cfg.SMTPMaxConnectionsPerIP,
		}, Receiving: core.Receiving, DMARC: core.DMARC, DMARCAddress: a.dmarcRUA()}, core.Feedback, a.logger)
		if err != nil {
			return err
		}
		addr, err := srv.Listen()
		if err != nil {
			return fmt.Errorf("inbound listener: %w", err)
		}
		a.mu.Lock()
		a.mxAddr = addr
		a.mu.Unlock()
		go func() { serveCh <- srv.Serve() }()
		a.logger.Info("listening", "service", "smtp-inbound", "addr", addr.String())
		return nil
	}
	running := untilServeEnds("inbound server", serveCh)
	stopping := func(error) error {
		if srv == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.grace())
		defer cancel()
		return srv.Shutdown(ctx)
	}
	return services.NewBasicService(starting, running, stopping).WithName(TargetInbound), nil
}
