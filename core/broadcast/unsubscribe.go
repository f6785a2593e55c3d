package broadcast

import (
	"context"
	"fmt"
	"strings"

	"github.com/postmill/postmill/core/marketing"
	"github.com/postmill/postmill/ports"
)

// msgInvalidToken is the one answer to every token that does not open, names a contact that is gone or
// belongs to another organization: the page reveals nothing about which.
const msgInvalidToken = "invalid token"

// unsubscribeSource is the consent source recorded for a one-click unsubscribe.
const unsubscribeSource = "one-click unsubscribe"

func invalidToken() error { return ports.Errorf(ports.CodeInvalidArgument, msgInvalidToken) }

// open opens an unsubscribe token and reads what it names, scoped by the organization sealed in it.
func (s *Service) open(ctx context.Context, token string) (marketing.PublicToken, ports.UnsubscribeView, error) {
	t, err := marketing.OpenPublicToken(s.deps.Keyring, marketing.PurposeUnsubscribe, token)
	if err != nil {
		return t, ports.UnsubscribeView{}, invalidToken()
	}
	email, topic, err := s.deps.Store.UnsubscribeSubject(ctx, t.OrganizationID, t.ContactID, t.TopicID)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return t, ports.UnsubscribeView{}, invalidToken()
	}
	if err != nil {
		return t, ports.UnsubscribeView{}, fmt.Errorf("broadcast: unsubscribe: %w", err)
	}
	prefs, err := s.preferencesToken(t.OrganizationID, t.ContactID)
	if err != nil {
		return t, ports.UnsubscribeView{}, err
	}
	return t, ports.UnsubscribeView{MaskedEmail: maskEmail(email), TopicName: topic, PreferencesToken: prefs}, nil
}

// preferencesToken seals a token for a contact's preference page (/p/prefs/{token}).
func (s *Service) preferencesToken(orgID, contactID string) (string, error) {
	return marketing.SealPublicToken(s.deps.Keyring, marketing.PurposePrefs, marketing.PublicToken{
		OrganizationID: orgID, ContactID: contactID, IssuedAt: s.now(),
	})
}

// PreviewUnsubscribe implements ports.PublicUnsubscribeService; it changes nothing, so a mail scanner that
// follows the link unsubscribes no one.
func (s *Service) PreviewUnsubscribe(ctx context.Context, token string) (ports.UnsubscribeView, error) {
	_, v, err := s.open(ctx, token)
	return v, err
}

// Unsubscribe implements ports.PublicUnsubscribeService: a topic's token ends that topic's subscription,
// a token without topic (a segment broadcast) sets the contact's consent to unsubscribed. Repeating it
// changes nothing more.
func (s *Service) Unsubscribe(ctx context.Context, token string) (ports.UnsubscribeView, error) {
	t, v, err := s.open(ctx, token)
	if err != nil {
		return v, err
	}
	if err := s.deps.Audience.UnsubscribeContact(ctx, t.OrganizationID, t.ContactID, t.TopicID, unsubscribeSource); err != nil {
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return ports.UnsubscribeView{}, invalidToken()
		}
		return ports.UnsubscribeView{}, fmt.Errorf("broadcast: unsubscribe: %w", err)
	}
	if t.BroadcastID != "" {
		if err := s.deps.Store.NoteUnsubscribe(ctx, t.OrganizationID, t.BroadcastID, t.ContactID, s.now()); err != nil {
			return ports.UnsubscribeView{}, err
		}
	}
	return v, nil
}

// maskEmail shows enough of an address for its owner to recognise it: "j•••@example.com".
func maskEmail(email string) string {
	at := strings.LastIndexByte(email, '@')
	if at < 1 {
		return "•••"
	}
	local := []rune(email[:at])
	return string(local[0]) + "•••" + email[at:]
}
