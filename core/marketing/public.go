package marketing

import (
	"context"

	"github.com/postmill/postmill/ports"
)

// PublicPreferences opens a prefs token and reads the contact's topic state.
func (p *Public) PublicPreferences(ctx context.Context, token string) (ports.Preferences, error) {
	t, err := OpenPublicToken(p.keyring, PurposePrefs, token)
	if err != nil {
		return ports.Preferences{}, err
	}
	return p.contacts.ContactPreferences(ctx, t.OrganizationID, t.ContactID)
}

// UpdatePublicPreferences opens a prefs token and applies the contact's own choices. Subscribing here needs no
// further confirmation: the token proves the contact reads the mailbox.
func (p *Public) UpdatePublicPreferences(ctx context.Context, token string, u ports.PreferenceUpdate) (ports.Preferences, error) {
	t, err := OpenPublicToken(p.keyring, PurposePrefs, token)
	if err != nil {
		return ports.Preferences{}, err
	}
	if err := checkPreferenceUpdate(u).err(); err != nil {
		return ports.Preferences{}, err
	}
	u.Source = "preferences"
	if err := p.contacts.ApplyPreferences(ctx, t.OrganizationID, t.ContactID, u, p.now()); err != nil {
		return ports.Preferences{}, err
	}
	return p.contacts.ContactPreferences(ctx, t.OrganizationID, t.ContactID)
}

// confirmToken opens a confirm token, which always names a topic.
func (p *Public) confirmToken(token string) (PublicToken, error) {
	t, err := OpenPublicToken(p.keyring, PurposeConfirm, token)
	if err == nil && t.TopicID == "" {
		err = errInvalidToken()
	}
	return t, err
}

// GetConfirmation reads the subscription a confirm token names; it changes nothing, so a link scanner that
// fetches the page does not confirm.
func (p *Public) GetConfirmation(ctx context.Context, token string) (ports.PublicConfirmation, error) {
	t, err := p.confirmToken(token)
	if err != nil {
		return ports.PublicConfirmation{}, err
	}
	topic, err := p.topics.GetTopic(ctx, t.OrganizationID, t.TopicID)
	if err != nil {
		return ports.PublicConfirmation{}, err
	}
	sub, err := p.topics.GetSubscription(ctx, t.OrganizationID, t.TopicID, t.ContactID)
	if err != nil {
		return ports.PublicConfirmation{}, err
	}
	return ports.PublicConfirmation{TopicKey: topic.Key, TopicName: topic.Name, Status: sub.Status}, nil
}

// ConfirmTopic moves the pending subscription to subscribed (and a pending contact's consent with it).
func (p *Public) ConfirmTopic(ctx context.Context, token, ip string) (ports.PublicConfirmation, error) {
	t, err := p.confirmToken(token)
	if err != nil {
		return ports.PublicConfirmation{}, err
	}
	topic, err := p.topics.GetTopic(ctx, t.OrganizationID, t.TopicID)
	if err != nil {
		return ports.PublicConfirmation{}, err
	}
	if len(ip) > ports.MaxConsentIPLen {
		ip = ip[:ports.MaxConsentIPLen]
	}
	sub, err := p.topics.ConfirmSubscription(ctx, t.OrganizationID, t.TopicID, t.ContactID, ip, p.now())
	if err != nil {
		return ports.PublicConfirmation{}, err
	}
	return ports.PublicConfirmation{TopicKey: topic.Key, TopicName: topic.Name, Status: sub.Status}, nil
}
