package tlspolicy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/postmill/postmill/ports"
)

// Bounds of the TLS-RPT counts: a day's reports grow with the domains mail goes to, and every detail row
// carries text from a peer.
const (
	maxReportDomains  = 10000 // policy domains counted per day; the rest are only logged
	maxFailureDetails = 100   // distinct failure rows per policy; the rest are folded into one
	maxReasonLen      = 200   // failure-reason-code length
	maxRUA            = 8     // rua destinations kept per domain
	dayLayout         = "2006-01-02"
)

// reports keeps the TLS-RPT counts per UTC day and policy domain (RFC 8460 §4: one report per policy
// domain and day, sent once the day is over) and writes them as files under Config.ReportDir.
type reports struct {
	e *Engine
	// flushing serializes flushes: a flush returns only once every count recorded before it began is on
	// disk, also when another flush had already taken those counts and was still writing them.
	flushing sync.Mutex
	mu       sync.Mutex
	days     map[string]map[string]*domainReport // day → policy domain → counts
	dropped  bool                                // maxReportDomains was reached today (logged once)
}

// domainReport is one day's counts for one policy domain, one policyCount per policy type.
type domainReport struct {
	policies map[string]*policyCount // "sts", "tlsa"
	dirty    bool
	rua      []string
	ruaKnown bool
}

type policyCount struct {
	strings  []string
	mxHosts  map[string]bool
	success  int64
	failures map[failureKey]int64
}

type failureKey struct {
	result, mx, reason string
}

func newReports(e *Engine) *reports {
	return &reports{e: e, days: make(map[string]map[string]*domainReport)}
}

// add counts one session (or one policy fetch) for h's policy domain: a success when result is "", else
// a failure of that result type with reason.
func (r *reports) add(h *Host, result, reason string) {
	day := r.e.cfg.Now().UTC().Format(dayLayout)
	r.mu.Lock()
	defer r.mu.Unlock()
	domains := r.days[day]
	if domains == nil {
		domains = make(map[string]*domainReport)
		r.days[day] = domains
		r.dropped = false
	}
	dr := domains[h.domain]
	if dr == nil {
		if len(domains) >= maxReportDomains {
			if !r.dropped {
				r.dropped = true
				r.e.log.Warn("TLS-RPT: too many policy domains today; further ones are not counted", "max", maxReportDomains)
			}
			return
		}
		dr = &domainReport{policies: make(map[string]*policyCount)}
		domains[h.domain] = dr
	}
	pt := h.policyType()
	pc := dr.policies[pt]
	if pc == nil {
		pc = &policyCount{mxHosts: make(map[string]bool), failures: make(map[failureKey]int64)}
		dr.policies[pt] = pc
	}
	if h.policy != nil {
		pc.strings = h.policy
	}
	if h.Name != "" && len(pc.mxHosts) < maxFailureDetails && !strings.HasPrefix(h.Name, "mta-sts.") {
		pc.mxHosts[h.Name] = true
	}
	dr.dirty = true
	if result == "" {
		pc.success++
		return
	}
	k := failureKey{result: result, mx: h.Name, reason: printable(reason, maxReasonLen)}
	if _, ok := pc.failures[k]; !ok && len(pc.failures) >= maxFailureDetails {
		k = failureKey{result: result, reason: "other failures"}
	}
	pc.failures[k]++
}

// printable keeps the printable ASCII of s, at most n bytes: reasons quote certificate names and server
// errors, which a peer chooses.
func printable(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		if c := s[i]; c >= ' ' && c <= '~' {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Report is an RFC 8460 §4.4 aggregate report.
type Report struct {
	OrganizationName string         `json:"organization-name"`
	DateRange        ReportRange    `json:"date-range"`
	ContactInfo      string         `json:"contact-info"`
	ReportID         string         `json:"report-id"`
	Policies         []ReportPolicy `json:"policies"`
}

// ReportRange is the day a report covers.
type ReportRange struct {
	Start string `json:"start-datetime"`
	End   string `json:"end-datetime"`
}

// ReportPolicy is one policy's counts.
type ReportPolicy struct {
	Policy         PolicyDescription `json:"policy"`
	Summary        ReportSummary     `json:"summary"`
	FailureDetails []FailureDetail   `json:"failure-details,omitempty"`
}

// PolicyDescription names the policy applied.
type PolicyDescription struct {
	Type   string   `json:"policy-type"` // sts or tlsa
	String []string `json:"policy-string,omitempty"`
	Domain string   `json:"policy-domain"`
	MXHost []string `json:"mx-host,omitempty"`
}

// ReportSummary counts the sessions.
type ReportSummary struct {
	Successful int64 `json:"total-successful-session-count"`
	Failed     int64 `json:"total-failure-session-count"`
}

// FailureDetail counts the failures of one kind at one MX host.
type FailureDetail struct {
	ResultType          string `json:"result-type"`
	ReceivingMXHostname string `json:"receiving-mx-hostname,omitempty"`
	FailedSessionCount  int64  `json:"failed-session-count"`
	FailureReasonCode   string `json:"failure-reason-code,omitempty"`
}

// flush writes the report of every domain counted since the last flush: <ReportDir>/<day>/<name>.json
// holding the RFC 8460 JSON, named as RFC 8460 §5.1 names report files
// (<reporter>!<policy-domain>!<begin>!<end>.json), and beside it <name>.rua with the domain's rua
// destinations from _smtp._tls.<domain> (RFC 8460 §3), one per line, empty when it publishes none. A day's
// file is rewritten as its counts grow; days before today are dropped from memory once written.
func (r *reports) flush(ctx context.Context) error {
	if r.e.cfg.ReportDir == "" {
		return nil
	}
	r.flushing.Lock()
	defer r.flushing.Unlock()
	today := r.e.cfg.Now().UTC().Format(dayLayout)
	type job struct {
		day, domain string
		dr          *domainReport
		report      Report
	}
	var jobs []job
	r.mu.Lock()
	for day, domains := range r.days {
		for domain, dr := range domains {
			if dr.dirty {
				jobs = append(jobs, job{day: day, domain: domain, dr: dr, report: r.build(day, domain, dr)})
				dr.dirty = false
			}
		}
	}
	r.mu.Unlock()

	var errs []error
	for _, j := range jobs {
		if !j.dr.ruaKnown {
			rua, err := r.lookupRUA(ctx, j.domain)
			r.mu.Lock()
			if err == nil {
				j.dr.rua, j.dr.ruaKnown = rua, true
			}
			r.mu.Unlock()
		}
		if err := r.write(j.day, j.domain, j.report, j.dr); err != nil {
			r.mu.Lock()
			j.dr.dirty = true
			r.mu.Unlock()
			errs = append(errs, err)
		}
	}
	r.mu.Lock()
	for day, domains := range r.days {
		if day >= today {
			continue
		}
		clean := true
		for _, dr := range domains {
			clean = clean && !dr.dirty
		}
		if clean {
			delete(r.days, day)
		}
	}
	r.mu.Unlock()
	return errors.Join(errs...)
}

// build renders one domain's counts; the caller holds r.mu.
func (r *reports) build(day, domain string, dr *domainReport) Report {
	rep := Report{
		OrganizationName: r.e.cfg.Organization,
		DateRange:        ReportRange{Start: day + "T00:00:00Z", End: day + "T23:59:59Z"},
		ContactInfo:      r.e.cfg.Contact,
		ReportID:         day + "_" + domain + "@" + r.e.cfg.Reporter,
	}
	types := make([]string, 0, len(dr.policies))
	for t := range dr.policies {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		pc := dr.policies[t]
		p := ReportPolicy{Policy: PolicyDescription{Type: t, String: slices.Clone(pc.strings), Domain: domain}}
		for mx := range pc.mxHosts {
			p.Policy.MXHost = append(p.Policy.MXHost, mx)
		}
		slices.Sort(p.Policy.MXHost)
		p.Summary.Successful = pc.success
		for k, n := range pc.failures {
			p.Summary.Failed += n
			p.FailureDetails = append(p.FailureDetails, FailureDetail{ResultType: k.result, ReceivingMXHostname: k.mx,
				FailedSessionCount: n, FailureReasonCode: k.reason})
		}
		slices.SortFunc(p.FailureDetails, func(a, b FailureDetail) int {
			return cmp.Or(cmp.Compare(a.ResultType, b.ResultType), cmp.Compare(a.ReceivingMXHostname, b.ReceivingMXHostname),
				cmp.Compare(a.FailureReasonCode, b.FailureReasonCode))
		})
		rep.Policies = append(rep.Policies, p)
	}
	return rep
}

// ReportFileName is the RFC 8460 §5.1 name of the report for domain on day (YYYY-MM-DD), without the
// extension.
func ReportFileName(reporter, domain, day string) string {
	start, _ := time.Parse(dayLayout, day)
	end := start.Add(24*time.Hour - time.Second)
	return reporter + "!" + domain + "!" + strconv.FormatInt(start.Unix(), 10) + "!" + strconv.FormatInt(end.Unix(), 10)
}

// write puts the report and its rua file in place atomically (a temporary file renamed over the old one).
func (r *reports) write(day, domain string, rep Report, dr *domainReport) error {
	dir := filepath.Join(r.e.cfg.ReportDir, day)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("tlsrpt: %w", err)
	}
	body, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("tlsrpt: %w", err)
	}
	stem := filepath.Join(dir, ReportFileName(r.e.cfg.Reporter, domain, day))
	r.mu.Lock()
	rua := strings.Join(dr.rua, "\n")
	r.mu.Unlock()
	if rua != "" {
		rua += "\n"
	}
	return errors.Join(writeAtomic(stem+".json", append(body, '\n')), writeAtomic(stem+".rua", []byte(rua)))
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tlsrpt-*")
	if err != nil {
		return fmt.Errorf("tlsrpt: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("tlsrpt: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("tlsrpt: %w", err)
	}
	return nil
}

// lookupRUA returns the report destinations a domain publishes (RFC 8460 §3): the rua of the one TXT record
// at _smtp._tls.<domain> starting with v=TLSRPTv1, mailto: and https: URIs only. No record is no
// destination; a DNS failure is an error, so the lookup is tried again at the next flush.
func (r *reports) lookupRUA(ctx context.Context, domain string) ([]string, error) {
	records, err := r.e.resolver.LookupTXT(ctx, "_smtp._tls."+domain)
	if err != nil {
		if k := dnsKind(err); k == ports.DNSNotFound || k == ports.DNSNoData {
			return nil, nil
		}
		return nil, err
	}
	return parseRUA(records), nil
}

// parseRUA reads the rua field of the TLS-RPT record among records; more than one such record means none
// (RFC 8460 §3: the record set must hold exactly one).
func parseRUA(records []string) []string {
	var found []string
	n := 0
	for _, rec := range records {
		fields := strings.Split(rec, ";")
		if strings.TrimSpace(fields[0]) != "v=TLSRPTv1" {
			continue
		}
		n++
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
			if !ok || strings.TrimSpace(k) != "rua" {
				continue
			}
			for u := range strings.SplitSeq(v, ",") {
				u = strings.TrimSpace(u)
				lower := strings.ToLower(u)
				if (strings.HasPrefix(lower, "mailto:") || strings.HasPrefix(lower, "https:")) && len(found) < maxRUA {
					found = append(found, printable(u, 512))
				}
			}
		}
	}
	if n != 1 {
		return nil
	}
	return found
}
