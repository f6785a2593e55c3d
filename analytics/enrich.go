package analytics

import (
	"context"
	"sort"
	"sync"

	"github.com/postmill/postmill/ports"
)

// MessageLookup reads a message of an organization (ports.MessageStore has it).
type MessageLookup interface {
	GetMessage(ctx context.Context, orgID, id string) (ports.Message, error)
}

// DomainLookup reads a sending domain of an organization (ports.DomainStore has it).
type DomainLookup interface {
	GetDomain(ctx context.Context, orgID, id string) (ports.Domain, error)
}

// DefaultEnrichCache is how many messages an Enricher remembers.
const DefaultEnrichCache = 100_000

// EnrichLookups is how many messages an Enricher reads at once.
const EnrichLookups = 4

// Enricher fills in the sending domain and the tags of message events read from a source that does not
// carry them (the Kafka events topic), from the messages themselves: both are fixed when a message is
// accepted, so each message is read once and remembered (up to a bound; the memory is emptied when full).
// A message or domain that is gone (not_found) leaves the event without domain or tags; any other error
// fails the batch, which the source then hands out again.
type Enricher struct {
	messages MessageLookup
	domains  DomainLookup
	size     int

	mu     sync.Mutex
	byMsg  map[string]dimensions // organization id + message id
	byDom  map[string]string     // organization id + domain id -> name
	lookup sync.Mutex            // one batch's lookups at a time
}

type dimensions struct {
	domain string
	tags   []string
}

// NewEnricher returns an Enricher remembering up to size messages (DefaultEnrichCache when size < 1).
func NewEnricher(messages MessageLookup, domains DomainLookup, size int) *Enricher {
	if size < 1 {
		size = DefaultEnrichCache
	}
	return &Enricher{messages: messages, domains: domains, size: size,
		byMsg: map[string]dimensions{}, byDom: map[string]string{}}
}

// Enrich sets Domain and Tags of every event of the batch, scoped by each event's organization. The
// messages not remembered yet are read concurrently, at most EnrichLookups at a time.
func (e *Enricher) Enrich(ctx context.Context, events []ports.AnalyticsEvent) error {
	e.lookup.Lock()
	defer e.lookup.Unlock()
	type msgKey struct{ org, id string }
	var missing []msgKey
	looked := map[msgKey]dimensions{}
	e.mu.Lock()
	for _, ev := range events {
		k := msgKey{ev.OrganizationID, ev.MessageID}
		if ev.MessageID == "" {
			continue
		}
		if _, ok := looked[k]; ok {
			continue
		}
		d, ok := e.byMsg[k.org+"/"+k.id]
		if !ok {
			missing = append(missing, k)
		}
		looked[k] = d
	}
	e.mu.Unlock()
	found := make([]dimensions, len(missing))
	errs := make([]error, len(missing))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(EnrichLookups, len(missing)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				found[i], errs[i] = e.message(ctx, missing[i].org, missing[i].id)
			}
		}()
	}
	for i := range missing {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, k := range missing {
		if errs[i] != nil {
			return errs[i]
		}
		looked[k] = found[i]
	}
	for i := range events {
		ev := &events[i]
		if ev.MessageID != "" {
			d := looked[msgKey{ev.OrganizationID, ev.MessageID}]
			ev.Domain, ev.Tags = d.domain, d.tags
		}
	}
	return nil
}

func (e *Enricher) message(ctx context.Context, org, id string) (dimensions, error) {
	key := org + "/" + id
	e.mu.Lock()
	d, ok := e.byMsg[key]
	e.mu.Unlock()
	if ok {
		return d, nil
	}
	m, err := e.messages.GetMessage(ctx, org, id)
	switch {
	case isNotFound(err):
		return dimensions{}, nil // not remembered: a message is never read before it exists, but be safe
	case err != nil:
		return dimensions{}, err
	}
	if m.DomainID != "" {
		if d.domain, err = e.domain(ctx, org, m.DomainID); err != nil {
			return dimensions{}, err
		}
	}
	names := make([]string, 0, len(m.Tags))
	for k := range m.Tags {
		names = append(names, k)
	}
	sort.Strings(names) // as the PostgreSQL outbox orders them: by name
	d.tags = make([]string, len(names))
	for i, k := range names {
		d.tags[i] = k + ":" + m.Tags[k]
	}
	e.mu.Lock()
	if len(e.byMsg) >= e.size {
		clear(e.byMsg)
	}
	e.byMsg[key] = d
	e.mu.Unlock()
	return d, nil
}

func (e *Enricher) domain(ctx context.Context, org, id string) (string, error) {
	key := org + "/" + id
	e.mu.Lock()
	name, ok := e.byDom[key]
	e.mu.Unlock()
	if ok {
		return name, nil
	}
	d, err := e.domains.GetDomain(ctx, org, id)
	switch {
	case isNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	}
	e.mu.Lock()
	if len(e.byDom) >= e.size {
		clear(e.byDom)
	}
	e.byDom[key] = d.Name
	e.mu.Unlock()
	return d.Name, nil
}

func isNotFound(err error) bool {
	pe, ok := ports.AsError(err)
	return ok && pe.Code == ports.CodeNotFound
}
