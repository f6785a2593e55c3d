package analytics

import (
	"context"
	"sync"

	"github.com/postmill/postmill/ports"
)

// DefaultEnrichCache is how many messages an Enricher remembers.
const DefaultEnrichCache = 100_000

// Enricher fills in the sending domain and the tags of message events read from a source that does not
// carry them (the Kafka events topic), from the messages themselves: both are fixed when a message is
// accepted, so each message is read once and remembered (up to a bound; the memory is emptied when full).
// The messages of a batch not remembered yet are read in one call to the store. A message the store does
// not hold leaves its events without domain or tags, and is not remembered; an error fails the batch,
// which the source then hands out again.
type Enricher struct {
	source ports.MessageDimensionSource
	size   int

	mu     sync.Mutex
	byMsg  map[ports.MessageRef]ports.MessageDimensions
	lookup sync.Mutex // one batch's read at a time
}

// NewEnricher returns an Enricher reading from source and remembering up to size messages
// (DefaultEnrichCache when size < 1).
func NewEnricher(source ports.MessageDimensionSource, size int) *Enricher {
	if size < 1 {
		size = DefaultEnrichCache
	}
	return &Enricher{source: source, size: size, byMsg: map[ports.MessageRef]ports.MessageDimensions{}}
}

// Enrich sets Domain and Tags of every event of the batch that names a message, scoped by each event's
// organization.
func (e *Enricher) Enrich(ctx context.Context, events []ports.AnalyticsEvent) error {
	e.lookup.Lock()
	defer e.lookup.Unlock()
	known := map[ports.MessageRef]ports.MessageDimensions{}
	var missing []ports.MessageRef
	e.mu.Lock()
	for _, ev := range events {
		k := ports.MessageRef{OrganizationID: ev.OrganizationID, MessageID: ev.MessageID}
		if ev.MessageID == "" {
			continue
		}
		if _, ok := known[k]; ok {
			continue
		}
		d, ok := e.byMsg[k]
		if !ok {
			missing = append(missing, k)
		}
		known[k] = d
	}
	e.mu.Unlock()
	if len(missing) > 0 {
		found, err := e.source.MessageDimensions(ctx, missing)
		if err != nil {
			return err
		}
		e.mu.Lock()
		for _, k := range missing {
			d, ok := found[k]
			if !ok {
				continue // not remembered: a message is never read before it exists, but be safe
			}
			if len(e.byMsg) >= e.size {
				clear(e.byMsg)
			}
			e.byMsg[k] = d
			known[k] = d
		}
		e.mu.Unlock()
	}
	for i := range events {
		ev := &events[i]
		if ev.MessageID != "" {
			d := known[ports.MessageRef{OrganizationID: ev.OrganizationID, MessageID: ev.MessageID}]
			ev.Domain, ev.Tags = d.Domain, d.Tags
		}
	}
	return nil
}
