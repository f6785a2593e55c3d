package mta

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// SiteRule shapes the traffic to one site: every recipient domain whose MX hosts match one of MXSuffixes
// (a host equal to the suffix or ending in "." + suffix). Zero fields take the default rule's value.
type SiteRule struct {
	// Name names the site; every domain matching the rule shares it (gmail.com and googlemail.com, and
	// every Google Workspace domain, are one site). Without a name, each set of MX hosts is a site.
	Name       string
	MXSuffixes []string
	// Connections caps the connections open to the site at once (per MX host of the site; mail goes to
	// its most preferred reachable host, so in practice to the site).
	Connections int
	// Rate is the most messages a second sent to the site (GCRA, gcra.go), with bursts of Burst; 0 means
	// no rate limit until the site answers with throttling (then the back-off starts from an estimate,
	// AdaptiveShaping.PerConnectionRate per connection).
	Rate  float64
	Burst int
	// MessagesPerConnection closes a connection after that many transactions (a new one is opened for the
	// next); 0 means no limit.
	MessagesPerConnection int
	// IdleTimeout closes a connection idle for that long.
	IdleTimeout time.Duration
}

// AdaptiveShaping tunes how sites that throttle are backed off from and recovered.
type AdaptiveShaping struct {
	// ErrorBurst 4xx replies in a row (without a delivery between them) count as throttling, like one 421.
	ErrorBurst int
	// Hold is the least time between two decreases of one site: the 421s of connections opened together
	// are one signal, not one each.
	Hold time.Duration
	// RecoverEvery is how often, without new throttling, a backed-off site gets one more connection and
	// a tenth of its configured (or estimated) rate back.
	RecoverEvery time.Duration
	// PerConnectionRate (messages a second) estimates a connection's throughput for a site without a
	// configured rate, as the starting point of its back-off.
	PerConnectionRate float64
	// LaneWait is the longest a job waits in memory for its site's rate (without holding a connection);
	// a job that would wait longer, or that finds its site's lane full (LaneJobs waiting), goes back to
	// the queue until its turn (NackAfter).
	LaneWait time.Duration
	LaneJobs int
}

// Shaping is the per-site traffic shaping of the MTA (docs/operations.md, "Per-destination shaping").
type Shaping struct {
	Default  SiteRule
	Sites    []SiteRule
	Adaptive AdaptiveShaping
}

// Defaults of the adaptive back-off.
const (
	DefaultShapingErrorBurst   = 10
	DefaultShapingHold         = 5 * time.Second
	DefaultShapingRecoverEvery = 30 * time.Second
	DefaultShapingConnRate     = 10.0
	DefaultShapingLaneWait     = 10 * time.Second
)

// DefaultSites are the built-in rules for the large mailbox providers, matched by MX host suffix. The
// limits are conservative: they follow what the providers publish where they publish a figure (Yahoo's
// Sender Hub: at most 20 messages per connection) and otherwise the common shaping of bulk senders
// (KumoMTA's "Configuring Traffic Shaping" guide and its community shaping file: a few tens of
// connections and about a hundred messages per connection to Gmail and Microsoft). None of them sets a
// rate: the adaptive back-off finds it from the provider's 421s.
func DefaultSites() []SiteRule {
	return []SiteRule{
		// Gmail and Google Workspace: gmail-smtp-in.l.google.com, aspmx.l.google.com, …googlemail.com.
		{Name: "google", MXSuffixes: []string{"google.com", "googlemail.com"}, Connections: 20, MessagesPerConnection: 100},
		// Outlook.com, Hotmail and Microsoft 365: *.mail.protection.outlook.com, *.olc.protection.outlook.com.
		{Name: "microsoft", MXSuffixes: []string{"protection.outlook.com", "outlook.com", "hotmail.com"}, Connections: 10, MessagesPerConnection: 100},
		// Yahoo, AOL and their partner domains: mta5.am0.yahoodns.net and friends.
		{Name: "yahoo", MXSuffixes: []string{"yahoodns.net"}, Connections: 10, MessagesPerConnection: 20},
		// iCloud, me.com, mac.com: mx01.mail.icloud.com, mx02.mail.icloud.com.
		{Name: "icloud", MXSuffixes: []string{"mail.icloud.com", "icloud.com"}, Connections: 10, MessagesPerConnection: 50},
	}
}

// withDefaults fills the zero fields of the default rule from cfg, every rule's zero fields from the
// default rule, and the adaptive settings from their defaults; nil sites take DefaultSites.
func (s *Shaping) withDefaults(cfg Config) Shaping {
	var out Shaping
	if s != nil {
		out = *s
	}
	if out.Sites == nil {
		out.Sites = DefaultSites()
	}
	d := &out.Default
	if d.Connections == 0 {
		d.Connections = cfg.Concurrency
	}
	if d.IdleTimeout == 0 {
		d.IdleTimeout = cfg.IdleConnTimeout
	}
	if d.Burst == 0 {
		d.Burst = max(1, int(d.Rate))
	}
	sites := make([]SiteRule, len(out.Sites))
	for i, r := range out.Sites {
		r.Connections = orInt(r.Connections, d.Connections)
		r.MessagesPerConnection = orInt(r.MessagesPerConnection, d.MessagesPerConnection)
		r.IdleTimeout = orDur(r.IdleTimeout, d.IdleTimeout)
		if r.Rate == 0 {
			r.Rate = d.Rate
		}
		r.Burst = orInt(r.Burst, max(1, int(r.Rate)))
		r.MXSuffixes = slices.Clone(r.MXSuffixes)
		for j, sfx := range r.MXSuffixes {
			r.MXSuffixes[j] = strings.Trim(strings.ToLower(sfx), ".")
		}
		sites[i] = r
	}
	out.Sites = sites
	a := &out.Adaptive
	a.ErrorBurst = orInt(a.ErrorBurst, DefaultShapingErrorBurst)
	a.Hold = orDur(a.Hold, DefaultShapingHold)
	a.RecoverEvery = orDur(a.RecoverEvery, DefaultShapingRecoverEvery)
	if a.PerConnectionRate == 0 {
		a.PerConnectionRate = DefaultShapingConnRate
	}
	a.LaneWait = orDur(a.LaneWait, DefaultShapingLaneWait)
	a.LaneJobs = orInt(a.LaneJobs, max(1, cfg.Workers/4))
	return out
}

// validate reports every invalid value.
func (s *Shaping) validate() error {
	if s == nil {
		return nil
	}
	var errs []error
	check := func(where string, r SiteRule) {
		if r.Connections < 0 || r.Burst < 0 || r.MessagesPerConnection < 0 || r.Rate < 0 || r.IdleTimeout < 0 {
			errs = append(errs, fmt.Errorf("mta: shaping %s: negative limit", where))
		}
	}
	check("default", s.Default)
	names := map[string]bool{}
	for i, r := range s.Sites {
		where := fmt.Sprintf("site %d (%s)", i, r.Name)
		check(where, r)
		if len(r.MXSuffixes) == 0 {
			errs = append(errs, fmt.Errorf("mta: shaping %s: no mx_suffixes", where))
		}
		for _, sfx := range r.MXSuffixes {
			if strings.Trim(sfx, ".") == "" || strings.ContainsAny(sfx, " \t,") {
				errs = append(errs, fmt.Errorf("mta: shaping %s: invalid MX suffix %q", where, sfx))
			}
		}
		if r.Name != "" && names[r.Name] {
			errs = append(errs, fmt.Errorf("mta: shaping %s: the name is used twice", where))
		}
		names[r.Name] = true
	}
	a := s.Adaptive
	if a.ErrorBurst < 0 || a.Hold < 0 || a.RecoverEvery < 0 || a.PerConnectionRate < 0 || a.LaneWait < 0 || a.LaneJobs < 0 {
		errs = append(errs, errors.New("mta: shaping: negative adaptive setting"))
	}
	return errors.Join(errs...)
}

// shapingFile is the JSON form of Shaping (POSTMILL_MTA_SHAPING_FILE): durations are strings such as
// "30s", rates are messages a second.
type shapingFile struct {
	Default  *siteFile  `json:"default"`
	Sites    []siteFile `json:"sites"`
	Builtin  *bool      `json:"builtin_sites"`
	Adaptive struct {
		ErrorBurst        int     `json:"error_burst"`
		Hold              string  `json:"hold"`
		RecoverEvery      string  `json:"recover_every"`
		PerConnectionRate float64 `json:"per_connection_rate"`
		LaneWait          string  `json:"lane_wait"`
		LaneJobs          int     `json:"lane_jobs"`
	} `json:"adaptive"`
}

type siteFile struct {
	Name                  string   `json:"name"`
	MXSuffixes            []string `json:"mx_suffixes"`
	Connections           int      `json:"connections"`
	Rate                  float64  `json:"rate"`
	Burst                 int      `json:"burst"`
	MessagesPerConnection int      `json:"messages_per_connection"`
	IdleTimeout           string   `json:"idle_timeout"`
}

// LoadShaping reads a shaping file (JSON, docs/operations.md). Its sites come before the built-in ones
// (DefaultSites), so they override them for the MX hosts they match, unless "builtin_sites" is false.
func LoadShaping(path string) (*Shaping, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mta: shaping file: %w", err)
	}
	return ParseShaping(raw)
}

// ParseShaping parses the content of a shaping file (LoadShaping).
func ParseShaping(raw []byte) (*Shaping, error) {
	var f shapingFile
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("mta: shaping file: %w", err)
	}
	var errs []error
	dur := func(field, v string) time.Duration {
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("mta: shaping file: %s: %w", field, err))
		}
		return d
	}
	rule := func(where string, r siteFile) SiteRule {
		return SiteRule{Name: r.Name, MXSuffixes: r.MXSuffixes, Connections: r.Connections, Rate: r.Rate, Burst: r.Burst,
			MessagesPerConnection: r.MessagesPerConnection, IdleTimeout: dur(where+".idle_timeout", r.IdleTimeout)}
	}
	s := &Shaping{Sites: []SiteRule{}}
	if f.Default != nil {
		s.Default = rule("default", *f.Default)
	}
	for i, r := range f.Sites {
		s.Sites = append(s.Sites, rule(fmt.Sprintf("sites[%d]", i), r))
	}
	if f.Builtin == nil || *f.Builtin {
		s.Sites = append(s.Sites, DefaultSites()...)
	}
	a := f.Adaptive
	s.Adaptive = AdaptiveShaping{ErrorBurst: a.ErrorBurst, Hold: dur("adaptive.hold", a.Hold), RecoverEvery: dur("adaptive.recover_every", a.RecoverEvery),
		PerConnectionRate: a.PerConnectionRate, LaneWait: dur("adaptive.lane_wait", a.LaneWait), LaneJobs: a.LaneJobs}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}
