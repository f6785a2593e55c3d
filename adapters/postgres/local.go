package postgres

import (
	"context"
	"fmt"

	"github.com/postmill/postmill/ports"
)

var _ ports.LocalDNSStore = (*LocalDNS)(nil)

// maxPublishedNames bounds the names one PublishedDomains call asks about: local mode's DNS server asks
// for the name queried and its parents, and a DNS name has at most 127 labels.
const maxPublishedNames = 128

// LocalDNS reads the records local mode's DNS server publishes (ports.LocalDNSStore). It is the one store
// that reads across organizations; the composition root builds it only in local mode. Safe for concurrent
// use.
type LocalDNS struct{ shared }

// LocalDNS returns the local mode store over the Store's pool.
func (s *Store) LocalDNS() *LocalDNS { return &LocalDNS{s.Accounts.shared} }

// PublishedDomains implements ports.LocalDNSStore: the domains named, of every organization, each with its
// records in generation order. A name held by two organizations comes back twice, once per domain.
func (s *LocalDNS) PublishedDomains(ctx context.Context, names []string) ([]ports.PublishedDomain, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if len(names) > maxPublishedNames {
		return nil, fmt.Errorf("postgres: %d names asked at once, at most %d", len(names), maxPublishedNames)
	}
	rows, err := s.queries.PublishedDomainRecords(ctx, names)
	if err := listError(err); err != nil {
		return nil, err
	}
	var (
		out    []ports.PublishedDomain
		lastID string
	)
	for _, r := range rows {
		// Rows come grouped by domain, its records in generation order.
		if len(out) == 0 || r.DomainID != lastID {
			out = append(out, ports.PublishedDomain{Name: r.DomainName})
			lastID = r.DomainID
		}
		d := &out[len(out)-1]
		d.Records = append(d.Records, ports.DNSRecord{DomainID: r.DomainID, Type: r.Type, Host: r.Host, Value: r.Value, TTL: int(r.Ttl)})
	}
	inbound, err := s.publishedInbound(ctx, names)
	return append(out, inbound...), err
}
