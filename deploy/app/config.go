package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/core/broadcast"
	"github.com/postmill/postmill/edge"
	"github.com/postmill/postmill/mta"
)

// Config is the whole platform's configuration. The binary fills it from POSTMILL_* environment variables
// (LoadEnv); tests fill it directly. Fields for tiers that later issues build are read and validated now so
// that the runtime contract of ARCHITECTURE.md holds from the first release.
type Config struct {
	DatabaseURL string
	Migrate     bool

	HTTPAddr string
	BaseURL  string
	// MetricsAddr is the operations listener: /metrics and /healthz, kept off the public edge
	// (POSTMILL_METRICS_ADDR; "off" turns it off). Empty means none: tests that build a Config by hand.
	MetricsAddr string
	// HTTPTimeouts bound how long the edge waits for a request's parts and takes to answer (see
	// edge.Timeouts); zero fields keep the edge's defaults. No environment variable: tests shorten them.
	HTTPTimeouts edge.Timeouts
	// RPCAddr is where a process running the core serves Connect for other tiers.
	RPCAddr string
	// CoreURL is where a process without the core reaches one (edge-only processes).
	CoreURL string
	// RPCTLSCert, RPCTLSKey and RPCTLSCA are PEM files for TLS on the hop between tiers. On a process
	// running the core: its server certificate and key, and, when the CA is set, client certificates
	// required and verified against it (mutual TLS). On a process without the core: its client
	// certificate and key (for a core that requires one) and the CA the core's certificate must chain to.
	RPCTLSCert string
	RPCTLSKey  string
	RPCTLSCA   string
	// RPCCredentials are the tier credentials a process without the core presents (POSTMILL_RPC_CREDENTIAL,
	// comma list, each naming its tier; `postmill rpc-credential --tier=…` prints them). Given one for
	// every tier it runs, the process needs no POSTMILL_SECRET_KEY and never builds the keyring.
	RPCCredentials []string

	SMTPAddr       string
	SubmissionAddr string
	// SubmissionHost is the host name shown with SMTP credentials; defaults to SubmissionAddr's host.
	SubmissionHost string
	// Connection limits of the two SMTP listeners, total and per client address; 0 keeps the listener's
	// default (see docs/operations.md, "SMTP listener limits").
	SMTPMaxConnections            int
	SMTPMaxConnectionsPerIP       int
	SubmissionMaxConnections      int
	SubmissionMaxConnectionsPerIP int

	DNSResolver       string
	MTAPort           int
	MTARelay          string
	MTARelayUsername  string
	MTARelayPassword  string
	MTAHelo           string
	MTAConcurrency    int
	MTASigningNice    int
	MTAChunking       bool
	MTAMaxAge         time.Duration
	MTARetryBase      time.Duration
	MTAAllowNets      []netip.Prefix
	MTAShapingFile    string
	Simulator         bool // POSTMILL_SIMULATOR: the mailbox simulator runs with the MTA tier (simulator.go)
	SubmissionTLSCert string
	SubmissionTLSKey  string
	S3Endpoint        string
	S3Bucket          string
	S3AccessKey       string
	S3SecretKey       string
	S3Region          string
	WebhookAllowNets  []netip.Prefix
	TrustedProxies    []netip.Prefix
	AdminEmails       []string
	AdminRequire2FA   bool // admin routes refuse (403) an admin without 2FA; tests and local runs turn it off
	RequestLog        bool // the edge records /v1 requests for GET /v1/logs (POSTMILL_REQUEST_LOG, default true)
	SpfInclude        string
	ReturnPathHost    string
	TrackingHost      string
	DMARCRua          string
	InboundMXHost     string
	// TrackingScheme is the scheme of open-pixel and click URLs on track.<domain> (https unless a
	// deployment serves tracking over plain http).
	TrackingScheme string
	// FeedbackAddress is the feedback-loop mailbox the MX listener accepts complaint reports at, besides
	// VERP return paths.
	FeedbackAddress   string
	Queue             string
	KafkaBrokers      []string
	Analytics         string
	ClickHouseDSN     string
	Blob              string
	Scanner           string
	ClamdAddr         string
	DefaultMonthly    int64
	DefaultWarmupCap  int64
	DataDir           string
	SecretKeys        [][]byte
	LogLevel          slog.Level
	ShutdownGraceSecs int
	// WebhookSchedule replaces SPEC §6's retry waits (15m, 30m, 1h, 2h). Tests set it; there is no
	// environment variable, because the schedule is part of the contract with receivers.
	WebhookSchedule []time.Duration
	// Local is local mode (POSTMILL_LOCAL and its variables, local.go).
	Local LocalConfig
	// MTATLS is the MTA's outbound transport security: MTA-STS, DANE, TLS-RPT (tier_mta_tls.go).
	MTATLS MTATLSConfig
	// Inbound is STARTTLS on the MX listener and the spam check of received mail (tier_inbound_config.go).
	Inbound InboundConfig
	// Reputation is automatic protection and adaptive warm-up (core_reputation_config.go).
	Reputation ReputationConfig
	// AnalyticsTier is the analytics tier's retention and Kafka consumer group (tier_analytics_config.go).
	AnalyticsTier AnalyticsTierConfig
	// PlansFile is the billing plan catalogue, a JSON file (POSTMILL_PLANS_FILE, docs/billing.md); empty
	// means the free plan alone.
	PlansFile string
	// LookupCacheTTL replaces how long the send path reuses an organization or a domain, and the account
	// area an API key record, it read when no change is announced (sending.DefaultLookupCacheTTL). Tests lengthen it to show that announced
	// changes, not the timeout, reach every process; there is no environment variable.
	LookupCacheTTL time.Duration
	// MaxDomainsPerOrg, MaxWebhooksPerOrg and MaxAPIKeysPerOrg bound what one organization may hold
	// (domains, webhook endpoints, API keys that are not revoked); creating one more is a 403. Zero keeps
	// the core's default (100, 20, 100).
	MaxDomainsPerOrg  int
	MaxWebhooksPerOrg int
	MaxAPIKeysPerOrg  int
	// Stripe is the payment provider of plans with a priceId (core_billing_stripe.go).
	Stripe StripeConfig
	// BroadcastLease is how long the broadcast expander's claim on a sending broadcast lasts without a
	// recorded page (POSTMILL_BROADCAST_LEASE, default broadcast.DefaultLease, 30s): how long a broadcast
	// waits after the process expanding it died.
	BroadcastLease time.Duration
	// BroadcastBacklog is how long broadcast work may wait in the PostgreSQL queue before the expander waits
	// to write more (POSTMILL_BROADCAST_BACKLOG, default broadcast.DefaultMaxBacklog, 10s).
	BroadcastBacklog time.Duration
}

// Getenv reads one variable; LoadEnv takes it as a parameter so tests need not touch the process
// environment.
type Getenv func(string) string

// LoadEnv reads the POSTMILL_* variables of ARCHITECTURE.md's runtime contract. When POSTMILL_SECRET_KEY is
// unset, a secret is generated once and kept in POSTMILL_DATA_DIR/secret.key (mode 0600) so that restarts,
// and several processes sharing the directory, agree on it; unless POSTMILL_RPC_CREDENTIAL is set, which
// makes the process one that calls a core elsewhere and keeps no secret of its own.
func LoadEnv(getenv Getenv) (Config, error) {
	str := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	var errs []error
	integer := func(name string, def int64) int64 {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: not an integer", name))
		}
		return n
	}
	duration := func(name string, def time.Duration) time.Duration {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive duration such as 90s or 72h", name, v))
		}
		return d
	}
	boolean := func(name string, def bool) bool {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return def
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not true or false", name, v))
			return def
		}
		return b
	}
	prefixes := func(name string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range list(getenv(name)) {
			p, err := parsePrefix(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a CIDR or address", name, s))
				continue
			}
			out = append(out, p)
		}
		return out
	}

	c := Config{
		DatabaseURL:       str("POSTMILL_DATABASE_URL", ""),
		Migrate:           str("POSTMILL_MIGRATE", "true") != "false",
		HTTPAddr:          str("POSTMILL_HTTP_ADDR", "127.0.0.1:8080"),
		RPCAddr:           str("POSTMILL_RPC_ADDR", "127.0.0.1:8081"),
		RPCTLSCert:        str("POSTMILL_RPC_TLS_CERT", ""),
		RPCTLSKey:         str("POSTMILL_RPC_TLS_KEY", ""),
		RPCTLSCA:          str("POSTMILL_RPC_TLS_CA", ""),
		RPCCredentials:    list(getenv("POSTMILL_RPC_CREDENTIAL")),
		SMTPAddr:          str("POSTMILL_SMTP_ADDR", "127.0.0.1:2525"),
		SubmissionAddr:    str("POSTMILL_SUBMISSION_ADDR", "127.0.0.1:1587"),
		SubmissionHost:    str("POSTMILL_SUBMISSION_HOST", ""),
		DNSResolver:       str("POSTMILL_DNS_RESOLVER", ""),
		MTAPort:           int(integer("POSTMILL_MTA_PORT", 25)),
		MTARelay:          str("POSTMILL_MTA_RELAY", ""),
		MTARelayUsername:  str("POSTMILL_MTA_RELAY_USERNAME", ""),
		MTARelayPassword:  str("POSTMILL_MTA_RELAY_PASSWORD", ""),
		MTAHelo:           str("POSTMILL_MTA_HELO", hostname()),
		MTAConcurrency:    int(integer("POSTMILL_MTA_CONCURRENCY", mta.DefaultConcurrency)),
		MTASigningNice:    int(integer("POSTMILL_MTA_SIGNING_NICE", mta.DefaultSigningNice)),
		MTAChunking:       boolean("POSTMILL_MTA_CHUNKING", true),
		MTAMaxAge:         duration("POSTMILL_MTA_MAX_AGE", 72*time.Hour),
		MTARetryBase:      duration("POSTMILL_MTA_RETRY_BASE", time.Minute),
		MTAAllowNets:      prefixes("POSTMILL_MTA_ALLOW_NETS"),
		MTAShapingFile:    str("POSTMILL_MTA_SHAPING_FILE", ""),
		Simulator:         boolean("POSTMILL_SIMULATOR", true),
		SubmissionTLSCert: str("POSTMILL_SUBMISSION_TLS_CERT", ""),
		SubmissionTLSKey:  str("POSTMILL_SUBMISSION_TLS_KEY", ""),
		S3Endpoint:        str("POSTMILL_S3_ENDPOINT", ""),
		S3Bucket:          str("POSTMILL_S3_BUCKET", "postmill"),
		S3AccessKey:       str("POSTMILL_S3_ACCESS_KEY", ""),
		S3SecretKey:       str("POSTMILL_S3_SECRET_KEY", ""),
		S3Region:          str("POSTMILL_S3_REGION", "us-east-1"),
		WebhookAllowNets:  prefixes("POSTMILL_WEBHOOK_ALLOW_NETS"),
		TrustedProxies:    prefixes("POSTMILL_TRUSTED_PROXIES"),
		AdminEmails:       list(strings.ToLower(getenv("POSTMILL_ADMIN_EMAILS"))),
		AdminRequire2FA:   boolean("POSTMILL_ADMIN_REQUIRE_2FA", true),
		RequestLog:        boolean("POSTMILL_REQUEST_LOG", true),
		SpfInclude:        str("POSTMILL_SPF_INCLUDE", "spf.postmill.local"),
		ReturnPathHost:    str("POSTMILL_RETURN_PATH_HOST", "bounces.postmill.local"),
		TrackingHost:      str("POSTMILL_TRACKING_HOST", "track.postmill.local"),
		DMARCRua:          str("POSTMILL_DMARC_RUA", "dmarc@reports.postmill.local"),
		InboundMXHost:     str("POSTMILL_INBOUND_MX_HOST", "mx.postmill.local"),
		TrackingScheme:    strings.ToLower(str("POSTMILL_TRACKING_SCHEME", "https")),
		Queue:             str("POSTMILL_QUEUE", "postgres"),
		KafkaBrokers:      list(getenv("POSTMILL_KAFKA_BROKERS")),
		Analytics:         str("POSTMILL_ANALYTICS", "postgres"),
		ClickHouseDSN:     str("POSTMILL_CLICKHOUSE_DSN", ""),
		Blob:              str("POSTMILL_BLOB", "fs"),
		Scanner:           str("POSTMILL_SCANNER", "builtin"),
		ClamdAddr:         str("POSTMILL_CLAMD_ADDR", ""),
		DefaultMonthly:    integer("POSTMILL_DEFAULT_MONTHLY_LIMIT", 3000),
		DefaultWarmupCap:  integer("POSTMILL_DEFAULT_WARMUP_CAP", 0),
		DataDir:           str("POSTMILL_DATA_DIR", "./.data"),
		ShutdownGraceSecs: int(integer("POSTMILL_SHUTDOWN_GRACE_SECONDS", 20)),
		BroadcastLease:    duration("POSTMILL_BROADCAST_LEASE", 0),
		BroadcastBacklog:  duration("POSTMILL_BROADCAST_BACKLOG", broadcast.DefaultMaxBacklog),
	}
	c.BaseURL = strings.TrimRight(str("POSTMILL_BASE_URL", "http://"+c.HTTPAddr), "/")
	c.Stripe = loadStripe(getenv)
	if c.MetricsAddr = str("POSTMILL_METRICS_ADDR", "127.0.0.1:9090"); c.MetricsAddr == "off" {
		c.MetricsAddr = ""
	}
	c.FeedbackAddress = strings.ToLower(str("POSTMILL_FEEDBACK_ADDRESS", "fbl@"+c.ReturnPathHost))
	coreScheme := "http://"
	if !c.rpcTLS().Empty() {
		coreScheme = "https://"
	}
	c.CoreURL = strings.TrimRight(str("POSTMILL_CORE_URL", coreScheme+c.RPCAddr), "/")
	c.SMTPMaxConnections = int(integer("POSTMILL_SMTP_MAX_CONNECTIONS", 0))
	c.SMTPMaxConnectionsPerIP = int(integer("POSTMILL_SMTP_MAX_CONNECTIONS_PER_IP", 0))
	c.SubmissionMaxConnections = int(integer("POSTMILL_SUBMISSION_MAX_CONNECTIONS", 0))
	c.SubmissionMaxConnectionsPerIP = int(integer("POSTMILL_SUBMISSION_MAX_CONNECTIONS_PER_IP", 0))
	for _, v := range []struct {
		name string
		def  int64
		to   *int
	}{{"POSTMILL_MAX_DOMAINS_PER_ORG", 100, &c.MaxDomainsPerOrg}, {"POSTMILL_MAX_WEBHOOKS_PER_ORG", 20, &c.MaxWebhooksPerOrg},
		{"POSTMILL_MAX_API_KEYS_PER_ORG", 100, &c.MaxAPIKeysPerOrg}} {
		if *v.to = int(integer(v.name, v.def)); *v.to < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1", v.name))
		}
	}
	local, err := loadLocalEnv(getenv)
	c.Local, errs = local, append(errs, err)
	c.shortenLocalRetries(getenv)
	mtaTLS, err := loadMTATLSEnv(getenv)
	c.MTATLS, errs = mtaTLS, append(errs, err)
	c.Inbound = loadInboundEnv(getenv)
	rep, err := loadReputationEnv(getenv)
	c.Reputation, errs = rep, append(errs, err)
	at, err := loadAnalyticsTierEnv(getenv)
	c.AnalyticsTier, errs = at, append(errs, err)
	c.PlansFile = strings.TrimSpace(getenv("POSTMILL_PLANS_FILE"))
	if err := c.LogLevel.UnmarshalText([]byte(str("POSTMILL_LOG_LEVEL", "info"))); err != nil {
		errs = append(errs, fmt.Errorf("POSTMILL_LOG_LEVEL: %w", err))
	}
	if keys := list(getenv("POSTMILL_SECRET_KEY")); len(keys) > 0 {
		for _, k := range keys {
			c.SecretKeys = append(c.SecretKeys, []byte(k))
		}
	} else if len(c.RPCCredentials) == 0 {
		// A process given its tier credentials is one without the core: it neither needs nor creates a
		// master secret.
		k, err := loadOrCreateSecret(c.DataDir)
		if err != nil {
			errs = append(errs, err)
		}
		c.SecretKeys = [][]byte{k}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate reports configuration that cannot work, before anything starts.
func (c *Config) Validate(targets Targets) error {
	var errs []error
	if targets.Has(TargetCore) && c.DatabaseURL == "" {
		errs = append(errs, errors.New("POSTMILL_DATABASE_URL is required for the core (make run supplies one)"))
	}
	errs = append(errs, c.validateRPC(targets)...)
	for _, k := range c.SecretKeys {
		if len(k) < 16 {
			errs = append(errs, errors.New("POSTMILL_SECRET_KEY: each key needs at least 16 characters"))
			break
		}
	}
	for name, addr := range map[string]string{"POSTMILL_HTTP_ADDR": c.HTTPAddr, "POSTMILL_RPC_ADDR": c.RPCAddr,
		"POSTMILL_SMTP_ADDR": c.SMTPAddr, "POSTMILL_SUBMISSION_ADDR": c.SubmissionAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not host:port", name, addr))
		}
	}
	if _, _, err := net.SplitHostPort(c.MetricsAddr); c.MetricsAddr != "" && err != nil {
		errs = append(errs, fmt.Errorf("POSTMILL_METRICS_ADDR: %q is not host:port (or off)", c.MetricsAddr))
	}
	switch c.TrackingScheme {
	case "http", "https":
	default:
		errs = append(errs, fmt.Errorf("POSTMILL_TRACKING_SCHEME: %q is not http or https", c.TrackingScheme))
	}
	switch c.Queue {
	case "postgres", "kafka":
	default:
		errs = append(errs, fmt.Errorf("POSTMILL_QUEUE: %q is not postgres or kafka", c.Queue))
	}
	switch c.Analytics {
	case "postgres", "clickhouse":
	default:
		errs = append(errs, fmt.Errorf("POSTMILL_ANALYTICS: %q is not postgres or clickhouse", c.Analytics))
	}
	switch c.Blob {
	case "fs", "s3":
	default:
		errs = append(errs, fmt.Errorf("POSTMILL_BLOB: %q is not fs or s3", c.Blob))
	}
	switch c.Scanner {
	case "builtin", "clamd":
	default:
		errs = append(errs, fmt.Errorf("POSTMILL_SCANNER: %q is not builtin or clamd", c.Scanner))
	}
	if c.Queue == "kafka" && len(c.KafkaBrokers) == 0 {
		errs = append(errs, errors.New("POSTMILL_QUEUE=kafka needs POSTMILL_KAFKA_BROKERS"))
	}
	if c.Blob == "s3" && c.S3Endpoint == "" {
		errs = append(errs, errors.New("POSTMILL_BLOB=s3 needs POSTMILL_S3_ENDPOINT"))
	}
	if c.Scanner == "clamd" && c.ClamdAddr == "" {
		errs = append(errs, errors.New("POSTMILL_SCANNER=clamd needs POSTMILL_CLAMD_ADDR"))
	}
	if (c.SubmissionTLSCert == "") != (c.SubmissionTLSKey == "") {
		errs = append(errs, errors.New("POSTMILL_SUBMISSION_TLS_CERT and POSTMILL_SUBMISSION_TLS_KEY go together"))
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"POSTMILL_SMTP_MAX_CONNECTIONS", c.SMTPMaxConnections}, {"POSTMILL_SMTP_MAX_CONNECTIONS_PER_IP", c.SMTPMaxConnectionsPerIP},
		{"POSTMILL_SUBMISSION_MAX_CONNECTIONS", c.SubmissionMaxConnections}, {"POSTMILL_SUBMISSION_MAX_CONNECTIONS_PER_IP", c.SubmissionMaxConnectionsPerIP}} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("%s must be >= 0 (0 keeps the default)", v.name))
		}
	}
	if c.MTAConcurrency < 1 {
		errs = append(errs, errors.New("POSTMILL_MTA_CONCURRENCY must be at least 1"))
	}
	if c.MTASigningNice < 0 || c.MTASigningNice > 19 {
		errs = append(errs, errors.New("POSTMILL_MTA_SIGNING_NICE must be between 0 and 19"))
	}
	if c.MTAShapingFile != "" {
		if _, err := mta.LoadShaping(c.MTAShapingFile); err != nil {
			errs = append(errs, fmt.Errorf("POSTMILL_MTA_SHAPING_FILE: %w", err))
		}
	}
	if c.DefaultMonthly < 0 || c.DefaultWarmupCap < 0 {
		errs = append(errs, errors.New("POSTMILL_DEFAULT_MONTHLY_LIMIT and POSTMILL_DEFAULT_WARMUP_CAP must be >= 0"))
	}
	if c.MaxDomainsPerOrg < 0 || c.MaxWebhooksPerOrg < 0 || c.MaxAPIKeysPerOrg < 0 {
		errs = append(errs, errors.New("POSTMILL_MAX_DOMAINS_PER_ORG, POSTMILL_MAX_WEBHOOKS_PER_ORG and POSTMILL_MAX_API_KEYS_PER_ORG must be at least 1"))
	}
	errs = append(errs, c.Local.validate(targets))
	errs = append(errs, c.Inbound.validate())
	errs = append(errs, c.Stripe.validate())
	return errors.Join(errs...)
}

// validateRPC checks the hop between tiers: a process running the core needs the master secret its
// credentials are derived from, and serves TLS only with a certificate; a process calling a core
// elsewhere needs a credential for every tier it runs (given, or derived from the secret), and with TLS
// settings it must reach the core over https, so that its credential never crosses the network in the
// clear. No error repeats a credential.
func (c *Config) validateRPC(targets Targets) []error {
	var errs []error
	if (c.RPCTLSCert == "") != (c.RPCTLSKey == "") {
		errs = append(errs, errors.New("POSTMILL_RPC_TLS_CERT and POSTMILL_RPC_TLS_KEY go together"))
	}
	given := map[rpc.Tier]bool{}
	for i, cred := range c.RPCCredentials {
		tier, err := rpc.CredentialTier(cred)
		if err != nil {
			errs = append(errs, fmt.Errorf("POSTMILL_RPC_CREDENTIAL: entry %d is not a tier credential (postmill rpc-credential --tier=… prints one)", i+1))
			continue
		}
		given[tier] = true
	}
	if targets.Has(TargetCore) {
		if len(c.SecretKeys) == 0 {
			errs = append(errs, errors.New("the core needs POSTMILL_SECRET_KEY (or POSTMILL_DATA_DIR without POSTMILL_RPC_CREDENTIAL)"))
		}
		if c.RPCTLSCA != "" && c.RPCTLSCert == "" {
			errs = append(errs, errors.New("POSTMILL_RPC_TLS_CA on the core requires client certificates over TLS: set POSTMILL_RPC_TLS_CERT and POSTMILL_RPC_TLS_KEY too"))
		}
		return errs
	}
	callers := callerTiers(targets)
	for _, tier := range callers {
		if !given[tier] && len(c.SecretKeys) == 0 {
			errs = append(errs, fmt.Errorf("--target=%s without the core needs a %s credential in POSTMILL_RPC_CREDENTIAL (or POSTMILL_SECRET_KEY)", tier, tier))
		}
	}
	if len(callers) > 0 {
		u, err := url.Parse(c.CoreURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			errs = append(errs, fmt.Errorf("POSTMILL_CORE_URL: %q is not an http:// or https:// URL", c.CoreURL))
		case u.Scheme == "http" && !c.rpcTLS().Empty():
			errs = append(errs, errors.New("POSTMILL_CORE_URL must be https:// when POSTMILL_RPC_TLS_* is set: the tier credential would cross in the clear"))
		}
	}
	return errs
}

// rpcTLS names the files of POSTMILL_RPC_TLS_*.
func (c *Config) rpcTLS() rpc.TLSFiles {
	return rpc.TLSFiles{Cert: c.RPCTLSCert, Key: c.RPCTLSKey, CA: c.RPCTLSCA}
}

// submission returns the host and port shown with SMTP credentials.
func (c *Config) submission() (string, int) {
	host, portStr, _ := net.SplitHostPort(c.SubmissionAddr)
	port, _ := strconv.Atoi(portStr)
	if c.SubmissionHost != "" {
		host = c.SubmissionHost
	}
	return host, port
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

func list(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// loadOrCreateSecret keeps the generated master secret in dir/secret.key. O_EXCL makes two processes
// starting at once agree: the loser reads the winner's file.
func loadOrCreateSecret(dir string) ([]byte, error) {
	path := filepath.Join(dir, "secret.key")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return []byte(strings.TrimSpace(string(b))), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("POSTMILL_DATA_DIR: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	key := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			return nil, rerr
		}
		return []byte(strings.TrimSpace(string(b))), nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(key + "\n"); err != nil {
		return nil, err
	}
	return []byte(key), f.Sync()
}
