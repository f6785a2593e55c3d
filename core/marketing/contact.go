package marketing

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// CreateContact validates and normalises a contact and stores it. consentStatus defaults to subscribed; consentAt
// is the time of creation.
func (s *Contacts) CreateContact(ctx context.Context, orgID string, in ports.ContactInput) (ports.Contact, error) {
	if err := checkContact("", &in, true).err(); err != nil {
		return ports.Contact{}, err
	}
	now := s.now()
	c := contactFrom(in)
	c.ID, c.OrganizationID, c.CreatedAt, c.UpdatedAt, c.ConsentAt = newID(), orgID, now, now, &now
	return s.contacts.CreateContact(ctx, c)
}

// contactFrom is the contact a validated create body describes.
func contactFrom(in ports.ContactInput) ports.Contact {
	c := ports.Contact{Email: in.Email, Properties: in.Properties, ConsentStatus: ports.ConsentSubscribed}
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&c.FirstName, in.FirstName)
	set(&c.LastName, in.LastName)
	set(&c.Locale, in.Locale)
	set(&c.Timezone, in.Timezone)
	set(&c.Source, in.Source)
	set(&c.ConsentStatus, in.ConsentStatus)
	set(&c.ConsentSource, in.ConsentSource)
	set(&c.ConsentIP, in.ConsentIP)
	if c.Properties == nil {
		c.Properties = map[string]any{}
	}
	return c
}

// GetContact returns one of the organization's contacts.
func (s *Contacts) GetContact(ctx context.Context, orgID, id string) (ports.Contact, error) {
	if !validID(id) {
		return ports.Contact{}, notFound("contact")
	}
	return s.contacts.GetContact(ctx, orgID, id)
}

// UpdateContact applies every field of in but the email, which is immutable.
func (s *Contacts) UpdateContact(ctx context.Context, orgID, id string, in ports.ContactInput) (ports.Contact, error) {
	v := checkContact("", &in, false)
	if in.Email != "" {
		v.add("email", msgImmutable)
	}
	if err := v.err(); err != nil {
		return ports.Contact{}, err
	}
	if !validID(id) {
		return ports.Contact{}, notFound("contact")
	}
	return s.contacts.UpdateContact(ctx, orgID, id, in, s.now())
}

// DeleteContact removes a contact and its subscriptions.
func (s *Contacts) DeleteContact(ctx context.Context, orgID, id string) error {
	if !validID(id) {
		return notFound("contact")
	}
	return s.contacts.DeleteContact(ctx, orgID, id)
}

// ListContacts checks the query (SPEC §4.7) and returns one page, newest first.
func (s *Contacts) ListContacts(ctx context.Context, orgID string, q ports.ContactQuery) (ports.ContactList, error) {
	var v violations
	if q.Limit == 0 {
		q.Limit = ports.DefaultListLimit
	}
	if q.Limit < 1 || q.Limit > ports.MaxListLimit {
		v.add("limit", fmt.Sprintf("must be between 1 and %d", ports.MaxListLimit))
	}
	if q.Offset < 0 {
		v.add("offset", "must be at least 0")
	}
	if q.ConsentStatus != "" && !validConsent(q.ConsentStatus) {
		v.add("consentStatus", msgConsent)
	}
	if !storable(q.Search) {
		v.add("search", msgStorable)
	} else if utf8.RuneCountInString(q.Search) > ports.MaxContactSearchLen {
		v.add("search", maxChars(ports.MaxContactSearchLen))
	}
	if err := v.err(); err != nil {
		return ports.ContactList{}, err
	}
	return s.contacts.ListContacts(ctx, orgID, q)
}

// maxExportPage bounds one page of the export stream.
const maxExportPage = 1000

// ExportContactsPage returns the contacts after afterID in id order, at most limit (1-1000).
func (s *Contacts) ExportContactsPage(ctx context.Context, orgID, afterID string, limit int) ([]ports.Contact, error) {
	if limit < 1 || limit > maxExportPage {
		limit = maxExportPage
	}
	if afterID != "" && !validID(afterID) {
		return nil, ports.ValidationError(ports.FieldViolation{Path: "after", Message: "must be a uuid"})
	}
	return s.contacts.ExportContacts(ctx, orgID, afterID, limit)
}

// ContactPreferences reads a contact's consent and the state of every topic of the organization.
func (s *Contacts) ContactPreferences(ctx context.Context, orgID, contactID string) (ports.Preferences, error) {
	if !validID(contactID) {
		return ports.Preferences{}, notFound("contact")
	}
	return s.contacts.ContactPreferences(ctx, orgID, contactID)
}

// UpdateContactPreferences applies a preference update on behalf of the API caller.
func (s *Contacts) UpdateContactPreferences(ctx context.Context, orgID, contactID string, u ports.PreferenceUpdate) (ports.Preferences, error) {
	if err := checkPreferenceUpdate(u).err(); err != nil {
		return ports.Preferences{}, err
	}
	if !validID(contactID) {
		return ports.Preferences{}, notFound("contact")
	}
	if u.Source == "" {
		u.Source = "api"
	}
	if err := s.contacts.ApplyPreferences(ctx, orgID, contactID, u, s.now()); err != nil {
		return ports.Preferences{}, err
	}
	return s.contacts.ContactPreferences(ctx, orgID, contactID)
}

// checkPreferenceUpdate checks the body of a preference update: at most 200 topics, each with a key.
func checkPreferenceUpdate(u ports.PreferenceUpdate) violations {
	var v violations
	if len(u.Topics) > ports.MaxPreferenceTopics {
		v.add("topics", fmt.Sprintf("must have at most %d entries", ports.MaxPreferenceTopics))
		return v
	}
	for i, t := range u.Topics {
		if !validTopicKey(t.Key) {
			v.add(fmt.Sprintf("topics.%d.key", i), msgTopicKey)
		}
	}
	return v
}
