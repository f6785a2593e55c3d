package tracking

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/ports"
)

// Service is the tracking use case behind the edge's public routes: it opens a token, checks its kind and
// writes the engagement event. It holds no state of its own; the store serialises concurrent opens of one
// message (RecordEngagement's lock), which is what makes email.opened a once-per-message event.
type Service struct {
	tracker *Tracker
	store   ports.TrackingStore
	clock   ports.Clock
	logger  *slog.Logger
}

var _ ports.TrackingService = (*Service)(nil)

// NewService builds the Service. A nil clock is the wall clock and a nil logger discards.
func NewService(t *Tracker, store ports.TrackingStore, clock ports.Clock, logger *slog.Logger) (*Service, error) {
	if t == nil || store == nil {
		return nil, errors.New("tracking: a tracker and a store are required")
	}
	if clock == nil {
		clock = ports.SystemClock{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{tracker: t, store: store, clock: clock, logger: logger}, nil
}

// Open implements ports.TrackingService: it records email.opened for the token's recipient unless the
// message has one already (SPEC §6: first time only). A click token is invalid here.
func (s *Service) Open(ctx context.Context, token string) error {
	tok, err := s.decode(token, KindOpen)
	if err != nil {
		return err
	}
	_, err = s.store.RecordEngagement(ctx, s.event(ports.EventEmailOpened, tok), true)
	return err
}

// Click implements ports.TrackingService: it finds the token's link in the HTML stored with the message,
// records email.clicked with the link's URL and its link_id (the token's index, in decimal), and returns the
// URL. An open token is invalid here; a link the stored HTML no longer has is not_found.
//
// A failure to record the click after the link was found is logged and the URL still returned: the
// recipient asked to go somewhere the message linked to, and an error page would cost them more than the
// lost event costs the sender.
func (s *Service) Click(ctx context.Context, token string) (string, error) {
	tok, err := s.decode(token, KindClick)
	if err != nil {
		return "", err
	}
	doc, err := s.store.MessageHTML(ctx, tok.OrganizationID, tok.MessageID)
	if err != nil {
		return "", err
	}
	target, ok := resolveLink(s.tracker.Links(doc), tok)
	if !ok {
		return "", ports.NotFound("link not found")
	}
	ev := s.event(ports.EventEmailClicked, tok)
	ev.URL = target
	ev.LinkID = strconv.Itoa(tok.LinkIndex)
	if _, err := s.store.RecordEngagement(ctx, ev, false); err != nil {
		s.logger.ErrorContext(ctx, "tracking: recording a click",
			slog.String("message_id", tok.MessageID), slog.String("error", err.Error()))
	}
	return target, nil
}

// resolveLink returns the URL a click token names: links[LinkIndex] when its digest matches, otherwise the
// first link with the token's digest (the extraction rules moved the link since the message was sent).
// A token whose digest matches no link of the message names nothing.
func resolveLink(links []string, tok Token) (string, bool) {
	if tok.LinkIndex < len(links) && LinkDigest(links[tok.LinkIndex]) == tok.LinkDigest {
		return links[tok.LinkIndex], true
	}
	for _, l := range links {
		if LinkDigest(l) == tok.LinkDigest {
			return l, true
		}
	}
	return "", false
}

// decode opens a token and checks its kind, so an open token cannot record a click nor a click token an
// open.
func (s *Service) decode(token string, kind byte) (Token, error) {
	tok, err := s.tracker.Decode(token)
	if err != nil {
		return Token{}, err
	}
	if tok.Kind != kind {
		return Token{}, invalidToken()
	}
	return tok, nil
}

// event is the engagement event of tok's recipient, with a UUIDv7 id (RFC 9562 §5.7) and the time now in
// UTC at PostgreSQL's microsecond resolution, so the event read back equals the one written.
func (s *Service) event(typ string, tok Token) ports.Event {
	return ports.Event{
		ID:             id.New(),
		Type:           typ,
		OrganizationID: tok.OrganizationID,
		MessageID:      tok.MessageID,
		RecipientID:    tok.RecipientID,
		OccurredAt:     s.clock.Now().UTC().Truncate(time.Microsecond),
	}
}
