package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grafana/dskit/modules"
	"github.com/grafana/dskit/services"

	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/smtpd"
	"github.com/postmill/postmill/adapters/smtpd/catcher"
	"github.com/postmill/postmill/core/sending"
	"github.com/postmill/postmill/edge/submission"
)

// Local mode (POSTMILL_LOCAL=true, what `make run` starts) lets a new user send a first email on a
// laptop. Two things are simulated, both inside this process, and nothing else changes: the API, the
// core's rules, domain verification, the MTA's routing, DKIM signing, events and webhooks are the real ones.
//
//   - DNS: an authoritative server (adapters/dns.Authority) publishes the five records of every sending
//     domain created on the instance, read from the store when asked, and answers every MX question with
//     the catcher. The platform's resolver points at it unless POSTMILL_DNS_RESOLVER is set.
//   - Recipients' mailboxes: every message goes over SMTP to a mail catcher (adapters/smtpd/catcher),
//     which the edge shows at /local/mail. The MTA reaches it through its ordinary MX routing (the
//     catcher's port as the MTA port, exactly the catcher's address exempt from the forbidden-address
//     rule); with a resolver of the user's own, through its relay setting instead.
const moduleLocal = "local"

// Defaults of LocalConfig.
const (
	DefaultLocalDNSAddr = "127.0.0.1:1053"
	DefaultCatcherAddr  = catcher.DefaultAddr
	DefaultCatcherMax   = catcher.DefaultMax
	// localMailHost is the name local DNS gives the catcher in MX answers. .localhost never resolves
	// anywhere else (RFC 6761 §6.3), so a leaked answer cannot send mail to a real host.
	localMailHost = "catcher.postmill.localhost"

	// LocalMTARetryBase and LocalMTAMaxAge replace the retry schedule's production defaults (1m, 72h) in
	// local mode when POSTMILL_MTA_RETRY_BASE or POSTMILL_MTA_MAX_AGE is unset, so that every outcome of
	// the mailbox simulator shows on a laptop within minutes: soft-bounce@ is delivered about 15 seconds
	// after the send and delay@ fails after about 75 (attempts at 0, 5, 15, 35 and 75 seconds; the first
	// deferral at least a minute after the message was queued fails it).
	LocalMTARetryBase = 5 * time.Second
	LocalMTAMaxAge    = time.Minute
)

// LocalConfig is local mode's part of the configuration.
type LocalConfig struct {
	Enabled     bool   // POSTMILL_LOCAL
	DNSAddr     string // POSTMILL_LOCAL_DNS_ADDR: the in-process DNS server, UDP and TCP
	CatcherAddr string // POSTMILL_CATCHER_ADDR: the catcher's SMTP listener
	CatcherMax  int    // POSTMILL_CATCHER_MAX: messages kept, newest first
	// DNSUpstream is where the local DNS server forwards questions about other names (webhook hosts):
	// "" means the system's name server, "none" refuses them. There is no variable; tests set it.
	DNSUpstream string
	// ShortRetryBase and ShortMaxAge say that local mode chose Config.MTARetryBase and Config.MTAMaxAge
	// because the user set no POSTMILL_MTA_RETRY_BASE or POSTMILL_MTA_MAX_AGE (shortenLocalRetries).
	ShortRetryBase, ShortMaxAge bool
}

// loadLocalEnv reads local mode's variables; LoadEnv calls it.
func loadLocalEnv(getenv Getenv) (LocalConfig, error) {
	str := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	var errs []error
	c := LocalConfig{DNSAddr: str("POSTMILL_LOCAL_DNS_ADDR", DefaultLocalDNSAddr),
		CatcherAddr: str("POSTMILL_CATCHER_ADDR", DefaultCatcherAddr), CatcherMax: DefaultCatcherMax}
	if v := strings.TrimSpace(getenv("POSTMILL_LOCAL")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("POSTMILL_LOCAL: %q is not true or false", v))
		}
		c.Enabled = b
	}
	if v := strings.TrimSpace(getenv("POSTMILL_CATCHER_MAX")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("POSTMILL_CATCHER_MAX: %q is not a positive integer", v))
		}
		c.CatcherMax = n
	}
	return c, errors.Join(errs...)
}

// shortenLocalRetries gives local mode its short retry schedule (LocalMTARetryBase, LocalMTAMaxAge) where
// the user set no variable; LoadEnv calls it after loadLocalEnv. A variable the user set always wins, and
// the maximum age is never made shorter than the first retry wait (Validate of core/sending refuses that).
func (c *Config) shortenLocalRetries(getenv Getenv) {
	if !c.Local.Enabled {
		return
	}
	if strings.TrimSpace(getenv("POSTMILL_MTA_RETRY_BASE")) == "" {
		c.MTARetryBase, c.Local.ShortRetryBase = LocalMTARetryBase, true
	}
	if strings.TrimSpace(getenv("POSTMILL_MTA_MAX_AGE")) == "" {
		c.MTAMaxAge, c.Local.ShortMaxAge = max(LocalMTAMaxAge, c.MTARetryBase), true
	}
}

// validate reports a local configuration that cannot work. Local mode needs the store (for the records
// it publishes), the edge (for the pages) and the MTA (to deliver to the catcher) in this process.
func (c LocalConfig) validate(targets Targets) error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	for _, t := range []string{TargetCore, TargetEdge, TargetMTA} {
		if !targets.Has(t) {
			errs = append(errs, fmt.Errorf("POSTMILL_LOCAL=true runs the core, edge and MTA in one process (--target=all); %s is missing", t))
		}
	}
	for name, addr := range map[string]string{"POSTMILL_LOCAL_DNS_ADDR": c.DNSAddr, "POSTMILL_CATCHER_ADDR": c.CatcherAddr} {
		if _, err := netip.ParseAddrPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not an IP address and port", name, addr))
		}
	}
	if c.CatcherMax < 1 {
		errs = append(errs, errors.New("POSTMILL_CATCHER_MAX must be at least 1"))
	}
	return errors.Join(errs...)
}

// localMode is what the local module started, for the MTA and the edge to find.
type localMode struct {
	mu          sync.Mutex
	catcher     *catcher.Catcher
	catcherAddr netip.AddrPort // the address local DNS publishes for the catcher, with its bound port
	dnsAddr     string
	ownResolver bool // the platform resolves through the local DNS server
}

// registerLocal adds the local module to the graph when local mode is on: it starts after the store and
// before the core, so every tier finds the resolver and the catcher in place.
func (a *App) registerLocal(mm *modules.Manager, deps map[string][]string) {
	if !a.cfg.Local.Enabled {
		return
	}
	mm.RegisterModule(moduleLocal, a.initLocal, modules.UserInvisibleModule)
	deps[moduleLocal] = []string{moduleStore}
	deps[TargetCore] = append(deps[TargetCore], moduleLocal)
}

// initLocal runs the local DNS server and the mail catcher.
func (a *App) initLocal() (services.Service, error) {
	var (
		auth    *dns.Authority
		c       *catcher.Catcher
		serveCh = make(chan error, 1)
	)
	shutdown := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), a.grace())
		defer cancel()
		var errs []error
		if c != nil {
			errs = append(errs, c.Shutdown(ctx))
		}
		if auth != nil {
			errs = append(errs, auth.Shutdown(ctx))
		}
		return errors.Join(errs...)
	}
	starting := func(ctx context.Context) (err error) {
		defer func() {
			if err != nil {
				_ = shutdown() // a failed start is never stopped: close what did start
			}
		}()
		lc := a.cfg.Local
		catcherAP := netip.MustParseAddrPort(lc.CatcherAddr) // validated
		mailAddr := catcherAP.Addr().Unmap()
		if mailAddr.IsUnspecified() {
			mailAddr = netip.MustParseAddr("127.0.0.1")
		}
		upstream := lc.DNSUpstream
		switch upstream {
		case "none":
			upstream = ""
		case "":
			upstream = dns.New("", dns.Options{}).Server()
		}
		auth, err = dns.NewAuthority(dns.AuthorityConfig{
			Addr: lc.DNSAddr, Domains: a.Store().LocalDNS(), MailHost: localMailHost, MailAddr: mailAddr,
			Upstream: upstream, Logger: a.logger,
		})
		if err != nil {
			return err
		}
		dnsAddr, err := auth.Start()
		if err != nil {
			return fmt.Errorf("local DNS (POSTMILL_LOCAL_DNS_ADDR): %w", err)
		}
		own := a.cfg.DNSResolver == ""
		if own {
			a.shared.mu.Lock()
			a.shared.resolver = dns.New(dnsAddr, dns.Options{})
			a.shared.mu.Unlock()
		}

		c, err = catcher.New(catcher.Config{
			Config: smtpd.Config{Addr: lc.CatcherAddr, Domain: localMailHost, MaxMessageBytes: submission.DefaultMaxMessageBytes},
			Dir:    filepath.Join(a.cfg.DataDir, "catcher"), Max: lc.CatcherMax,
		}, a.dnsResolver(), a.logger)
		if err != nil {
			return err
		}
		bound, err := c.Listen()
		if err != nil {
			return fmt.Errorf("mail catcher (POSTMILL_CATCHER_ADDR): %w", err)
		}
		go func() { serveCh <- c.Serve() }()
		port := uint16(bound.(*net.TCPAddr).Port)

		a.local.mu.Lock()
		a.local.catcher, a.local.catcherAddr = c, netip.AddrPortFrom(mailAddr, port)
		a.local.dnsAddr, a.local.ownResolver = dnsAddr, own
		a.local.mu.Unlock()
		a.logger.Warn("LOCAL MODE: DNS and recipients' mailboxes are simulated in this process; no email leaves this machine",
			"local_dns", dnsAddr, "platform_resolver", map[bool]string{true: dnsAddr, false: a.cfg.DNSResolver}[own],
			"catcher_smtp", bound.String(), "caught_mail", a.cfg.BaseURL+"/local/mail",
			"catcher_dir", filepath.Join(a.cfg.DataDir, "catcher"), "catcher_max", lc.CatcherMax,
			"mta_route", a.localRouteText(), "mta_retries", a.localRetryText())
		return nil
	}
	running := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveCh:
			return fmt.Errorf("mail catcher: %w", err)
		}
	}
	stopping := func(error) error { return shutdown() }
	return services.NewBasicService(starting, running, stopping).WithName(moduleLocal), nil
}

// localCatcher is the running catcher in local mode, nil otherwise.
func (a *App) localCatcher() *catcher.Catcher {
	a.local.mu.Lock()
	defer a.local.mu.Unlock()
	return a.local.catcher
}

// LocalDNSAddr is the local DNS server's host:port in local mode ("" otherwise; useful with :0).
func (a *App) LocalDNSAddr() string {
	a.local.mu.Lock()
	defer a.local.mu.Unlock()
	return a.local.dnsAddr
}

// CatcherAddr is the catcher's SMTP host:port in local mode ("" otherwise; useful with :0).
func (a *App) CatcherAddr() string {
	a.local.mu.Lock()
	defer a.local.mu.Unlock()
	if a.local.catcher == nil {
		return ""
	}
	return a.local.catcherAddr.String()
}

// mtaRoute is where the MTA delivers: the configured port, relay and exempt networks, which local mode
// turns toward the catcher. With the local DNS as resolver every MX answer names the catcher, so the MTA
// keeps its MX routing and only learns the catcher's port and that exactly the catcher's address is
// allowed; with a resolver of the user's own, the catcher becomes the relay. A relay the user set wins.
func (a *App) mtaRoute() (port int, relay string, allow []netip.Prefix) {
	port, relay, allow = a.cfg.MTAPort, a.cfg.MTARelay, a.cfg.MTAAllowNets
	a.local.mu.Lock()
	defer a.local.mu.Unlock()
	if a.local.catcher == nil || relay != "" {
		return port, relay, allow
	}
	ap := a.local.catcherAddr
	if !a.local.ownResolver {
		return port, ap.String(), allow
	}
	allow = append(slices.Clone(allow), netip.PrefixFrom(ap.Addr(), ap.Addr().BitLen()))
	return int(ap.Port()), relay, allow
}

// localRouteText says in the startup log how the MTA reaches the catcher.
func (a *App) localRouteText() string {
	port, relay, _ := a.mtaRoute()
	switch {
	case a.cfg.MTARelay != "":
		return "POSTMILL_MTA_RELAY " + relay + " (set by you): mail goes there, not to the catcher"
	case relay != "":
		return "relay to the catcher " + relay + " (POSTMILL_DNS_RESOLVER is yours)"
	}
	return fmt.Sprintf("MX of every domain → %s, port %d", localMailHost, port)
}

// localRetryText says in the startup log which retry schedule local mode runs with, and whose it is.
func (a *App) localRetryText() string {
	whose := func(short bool) string {
		if short {
			return "local mode's default"
		}
		return "set by you"
	}
	return fmt.Sprintf("POSTMILL_MTA_RETRY_BASE %s (%s), POSTMILL_MTA_MAX_AGE %s (%s); production defaults %s and %s",
		a.cfg.MTARetryBase, whose(a.cfg.Local.ShortRetryBase), a.cfg.MTAMaxAge, whose(a.cfg.Local.ShortMaxAge),
		sending.DefaultRetryBase, sending.DefaultMaxAge)
}

// webhookAllowNets is POSTMILL_WEBHOOK_ALLOW_NETS, plus the loopback addresses in local mode: a webhook
// receiver started on the developer's machine (README's walkthrough) is reached at 127.0.0.1 or ::1.
// Every other forbidden address (private, link-local, metadata, …) stays refused.
func (a *App) webhookAllowNets() []netip.Prefix {
	allow := a.cfg.WebhookAllowNets
	if !a.cfg.Local.Enabled {
		return allow
	}
	return append(slices.Clone(allow), netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"))
}
