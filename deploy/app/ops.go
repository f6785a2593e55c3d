package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/grafana/dskit/services"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// moduleOps is the operations listener in the dskit graph: every tier depends on it, so it starts first and
// stops last and metrics can be scraped while the tiers drain.
const moduleOps = "ops"

// initOps runs the operations listener on POSTMILL_METRICS_ADDR: GET /metrics (every metric of the
// process, whichever tiers it runs) and GET /healthz. It is a listener of its own, by default on loopback,
// so that neither reaches the public edge. With no address configured it does nothing.
func (a *App) initOps() (services.Service, error) {
	if a.cfg.MetricsAddr == "" {
		return services.NewIdleService(nil, nil).WithName(moduleOps), nil
	}
	var (
		srv     *http.Server
		serveCh = make(chan error, 1)
	)
	starting := func(context.Context) error {
		ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		a.mu.Lock()
		a.opsAddr = ln.Addr()
		a.mu.Unlock()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
		})
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
		go func() { serveCh <- srv.Serve(ln) }()
		a.logger.Info("listening", "service", "metrics", "addr", ln.Addr().String())
		return nil
	}
	running := untilServeEnds("metrics server", serveCh)
	stopping := func(error) error {
		if srv == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.grace())
		defer cancel()
		return srv.Shutdown(ctx)
	}
	return services.NewBasicService(starting, running, stopping).WithName(moduleOps), nil
}

// MetricsURL is the operations listener's base URL (useful with a :0 listener); "" when it is off.
func (a *App) MetricsURL() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.opsAddr == nil {
		return ""
	}
	return "http://" + a.opsAddr.String()
}

// untilServeEnds is the running function of a service around a server whose Serve sends its result on
// serveCh: it returns when the service is asked to stop, or with the server's error if Serve ends first.
func untilServeEnds(name string, serveCh <-chan error) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveCh:
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}
