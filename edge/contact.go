package edge

import (
	"context"
	"net/http"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// tagContacts is the OpenAPI tag of the contact routes (SPEC §4.7).
const tagContacts = "Contacts"

// ImportMaxBodyBytes bounds the body of POST /v1/contacts/import: an 8 MiB CSV document written as a JSON
// string, with room for its escapes, or 10,000 contacts.
const ImportMaxBodyBytes int64 = 24 << 20

type contactResponse struct {
	ID            string         `json:"id" format:"uuid" doc:"Contact id"`
	Email         string         `json:"email" format:"email" doc:"Trimmed and lower-cased; unique in the organization; immutable"`
	FirstName     string         `json:"firstName" doc:"First name; empty when unknown"`
	LastName      string         `json:"lastName" doc:"Last name; empty when unknown"`
	Locale        string         `json:"locale" doc:"Locale such as fr-CA; empty when unknown"`
	Timezone      string         `json:"timezone" doc:"IANA time zone such as Europe/Paris; empty when unknown"`
	Source        string         `json:"source" doc:"Where the contact came from; import for imported contacts unless the row says otherwise"`
	Properties    map[string]any `json:"properties" doc:"Custom properties: strings, numbers, booleans or null"`
	ConsentStatus string         `json:"consentStatus" enum:"subscribed,unsubscribed,pending" doc:"Consent to marketing mail; only subscribed contacts are in broadcast audiences"`
	ConsentSource string         `json:"consentSource" doc:"How consent was given or withdrawn (a form, an import, one-click, complaint, ...)"`
	ConsentIP     string         `json:"consentIp" doc:"The IP address consent came from, when known"`
	ConsentAt     *time.Time     `json:"consentAt" doc:"When consentStatus last changed"`
	Bounced       bool           `json:"bounced" doc:"true once a message to the contact bounced permanently; bounced contacts are left out of audiences"`
	LastSentAt    *time.Time     `json:"lastSentAt" doc:"When a message last left for the contact; null before the first"`
	LastActiveAt  *time.Time     `json:"lastActiveAt" doc:"When the contact last opened or clicked; null before the first"`
	CreatedAt     time.Time      `json:"createdAt" doc:"When the contact was created"`
	UpdatedAt     time.Time      `json:"updatedAt" doc:"When the contact last changed"`
}

func toContact(c ports.Contact) contactResponse {
	props := c.Properties
	if props == nil {
		props = map[string]any{}
	}
	return contactResponse{ID: c.ID, Email: c.Email, FirstName: c.FirstName, LastName: c.LastName, Locale: c.Locale,
		Timezone: c.Timezone, Source: c.Source, Properties: props, ConsentStatus: c.ConsentStatus,
		ConsentSource: c.ConsentSource, ConsentIP: c.ConsentIP, ConsentAt: utcPtr(c.ConsentAt), Bounced: c.Bounced,
		LastSentAt: utcPtr(c.LastSentAt), LastActiveAt: utcPtr(c.LastActiveAt), CreatedAt: utc(c.CreatedAt),
		UpdatedAt: utc(c.UpdatedAt)}
}

// contactFields are the fields of a create body and of an import row.
type contactRequest struct {
	_             struct{}       `json:"-" additionalProperties:"true"`
	Email         string         `json:"email" doc:"Required; trimmed and lower-cased, at most 320 characters, no CR or LF"`
	FirstName     *string        `json:"firstName,omitempty" doc:"At most 200 characters"`
	LastName      *string        `json:"lastName,omitempty" doc:"At most 200 characters"`
	Locale        *string        `json:"locale,omitempty" doc:"At most 35 characters"`
	Timezone      *string        `json:"timezone,omitempty" doc:"At most 64 characters"`
	Source        *string        `json:"source,omitempty" doc:"At most 64 characters; import defaults it to import"`
	Properties    map[string]any `json:"properties,omitempty" doc:"At most 100 keys of at most 64 characters; values are strings of at most 1024 characters, numbers, booleans or null"`
	ConsentStatus *string        `json:"consentStatus,omitempty" doc:"subscribed (the default), unsubscribed or pending"`
	ConsentSource *string        `json:"consentSource,omitempty" doc:"At most 128 characters"`
	ConsentIP     *string        `json:"consentIp,omitempty" doc:"At most 64 characters"`
}

func (r contactRequest) input() ports.ContactInput {
	return ports.ContactInput{Email: r.Email, FirstName: r.FirstName, LastName: r.LastName, Locale: r.Locale,
		Timezone: r.Timezone, Source: r.Source, Properties: r.Properties, ConsentStatus: r.ConsentStatus,
		ConsentSource: r.ConsentSource, ConsentIP: r.ConsentIP}
}

// patchContactRequest is every create field but the email, which is immutable.
type patchContactRequest struct {
	_             struct{}       `json:"-" additionalProperties:"true"`
	Email         *string        `json:"email,omitempty" doc:"Immutable: any value is refused with 400"`
	FirstName     *string        `json:"firstName,omitempty" doc:"At most 200 characters; absent leaves it as it is"`
	LastName      *string        `json:"lastName,omitempty" doc:"At most 200 characters; absent leaves it as it is"`
	Locale        *string        `json:"locale,omitempty" doc:"At most 35 characters; absent leaves it as it is"`
	Timezone      *string        `json:"timezone,omitempty" doc:"At most 64 characters; absent leaves it as it is"`
	Source        *string        `json:"source,omitempty" doc:"At most 64 characters; absent leaves it as it is"`
	Properties    map[string]any `json:"properties,omitempty" doc:"Replaces every property; at most 100 keys"`
	ConsentStatus *string        `json:"consentStatus,omitempty" doc:"subscribed, unsubscribed or pending; a change moves consentAt"`
	ConsentSource *string        `json:"consentSource,omitempty" doc:"At most 128 characters"`
	ConsentIP     *string        `json:"consentIp,omitempty" doc:"At most 64 characters"`
}

type patchContactInput struct {
	ID   string `path:"id" format:"uuid" doc:"Contact id"`
	Body patchContactRequest
}

type listContactsInput struct {
	Limit         int    `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size, 1-100"`
	Offset        int    `query:"offset" minimum:"0" default:"0" doc:"Contacts to skip"`
	ConsentStatus string `query:"consentStatus" enum:"subscribed,unsubscribed,pending," doc:"Only contacts with this consent status"`
	Search        string `query:"search" maxLength:"320" doc:"A substring of the email, first or last name (case-insensitive)"`
	Envelope      bool   `query:"envelope" doc:"true (or 1) answers {data, total, limit, offset} instead of a bare array"`
}

// contactList is the answer of GET /v1/contacts in either shape (SPEC §4.7).
type contactList struct {
	items                []contactResponse
	envelope             bool
	total, limit, offset int
}

type contactEnvelope struct {
	Data   []contactResponse `json:"data"`
	Total  int               `json:"total"`
	Limit  int               `json:"limit"`
	Offset int               `json:"offset"`
}

// MarshalJSON writes the bare array, or the envelope.
func (l contactList) MarshalJSON() ([]byte, error) {
	items := l.items
	if items == nil {
		items = []contactResponse{}
	}
	if !l.envelope {
		return marshalJSON(items)
	}
	return marshalJSON(contactEnvelope{Data: items, Total: l.total, Limit: l.limit, Offset: l.offset})
}

// Schema documents both shapes.
func (contactList) Schema(r huma.Registry) *huma.Schema {
	item := r.Schema(reflect.TypeFor[contactResponse](), true, "")
	return &huma.Schema{OneOf: []*huma.Schema{
		{Type: huma.TypeArray, Items: item, Description: "Without envelope: the page as a bare array, newest first"},
		{
			Type: huma.TypeObject, Description: "With envelope=true: the page with the total",
			Required: []string{"data", "total", "limit", "offset"},
			Properties: map[string]*huma.Schema{
				"data":   {Type: huma.TypeArray, Items: item, Description: "Newest first"},
				"total":  {Type: huma.TypeInteger, Description: "Contacts matching the filters"},
				"limit":  {Type: huma.TypeInteger, Description: "The page size asked for"},
				"offset": {Type: huma.TypeInteger, Description: "The offset asked for"},
			},
		},
	}}
}

type importRequest struct {
	_        struct{}          `json:"-" additionalProperties:"true"`
	Contacts *[]contactRequest `json:"contacts,omitempty" maxItems:"10000" doc:"Up to 10,000 contacts, validated like single creates; exactly one of contacts and csv"`
	CSV      *string           `json:"csv,omitempty" doc:"A CSV document of at most 8 MiB with a header row naming an email column (case-insensitive); first_name, last_name, locale, timezone, source and consent_status map to fields, any other header to properties.<header>; empty cells are omitted"`
	Upsert   *bool             `json:"upsert,omitempty" doc:"Update existing contacts (only the fields a row sets; properties merge) instead of skipping them; default true"`
}

type importRowError struct {
	Index   int           `json:"index" doc:"Zero-based index of the row in contacts, or of the data row in csv"`
	Message string        `json:"message" doc:"Validation failed"`
	Details []errorDetail `json:"details" doc:"What is wrong, with paths such as contacts.3.email or csv.3.firstName"`
}

type importResponse struct {
	Created int              `json:"created" doc:"Contacts created"`
	Updated int              `json:"updated" doc:"Existing contacts updated"`
	Skipped int              `json:"skipped" doc:"Rows not written: bad rows, earlier duplicates of an email (the last one wins) and existing contacts when upsert is false"`
	Errors  []importRowError `json:"errors" nullable:"false" doc:"The bad rows, by index"`
}

func (s *Server) registerContactRoutes() {
	if s.core.Contacts == nil {
		return
	}
	read := access{kind: authKey, scopes: []string{ports.ScopeContactsRead}}
	list := access{kind: authKey, scopes: []string{ports.ScopeContactsRead, ports.ScopeContactsWrite}}
	write := access{kind: authKey, scopes: []string{ports.ScopeContactsWrite}}
	op := func(id, method, path string, status int, summary, desc string) huma.Operation {
		return huma.Operation{OperationID: id, Method: method, Path: path, DefaultStatus: status,
			Tags: []string{tagContacts}, Summary: summary, Description: desc}
	}
	register(s, op("create-contact", http.MethodPost, "/v1/contacts", http.StatusCreated, "Create a contact",
		"Creates a contact. The email is trimmed and lower-cased; another contact with the same normalised email "+
			"is 409 with constraint contacts_organization_id_email_key."),
		write, s.createContact, http.StatusBadRequest, http.StatusConflict)
	register(s, op("list-contacts", http.MethodGet, "/v1/contacts", http.StatusOK, "List contacts",
		"The organization's contacts, newest first: a bare array, or with envelope=true {data, total, limit, offset}."),
		list, s.listContacts, http.StatusBadRequest)
	imp := op("import-contacts", http.MethodPost, "/v1/contacts/import", http.StatusOK, "Import contacts",
		"Creates and updates up to 10,000 contacts in one transaction, from contacts or a CSV document. Bad rows "+
			"are reported by zero-based index and skipped; the rest import. Duplicate emails collapse, the last "+
			"occurrence winning.")
	imp.MaxBodyBytes = ImportMaxBodyBytes
	register(s, imp, write, s.importContacts, http.StatusBadRequest)
	s.registerContactExport(read)
	register(s, op("get-contact", http.MethodGet, "/v1/contacts/{id}", http.StatusOK, "Get a contact", "One contact."),
		read, s.getContact, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("update-contact", http.MethodPatch, "/v1/contacts/{id}", http.StatusOK, "Update a contact",
		"Changes the fields given; the email is immutable."),
		write, s.updateContact, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("delete-contact", http.MethodDelete, "/v1/contacts/{id}", http.StatusOK, "Delete a contact",
		"Deletes the contact and its topic subscriptions."),
		write, s.deleteContact, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("get-contact-preferences", http.MethodGet, "/v1/contacts/{id}/preferences", http.StatusOK,
		"Get a contact's preferences", "The contact's consent and its state on every topic of the organization."),
		read, s.getContactPreferences, http.StatusBadRequest, http.StatusNotFound)
	register(s, op("update-contact-preferences", http.MethodPatch, "/v1/contacts/{id}/preferences", http.StatusOK,
		"Update a contact's preferences", "The body of the public preference page: {topics: [{key, subscribed}], "+
			"unsubscribeAll?}, at most 200 topics. An unknown key is 400 and changes nothing."),
		write, s.updateContactPreferences, http.StatusBadRequest, http.StatusNotFound)
}

func (s *Server) createContact(ctx context.Context, in *body[contactRequest]) (*body[contactResponse], error) {
	c, err := s.core.Contacts.CreateContact(ctx, principalFrom(ctx).OrganizationID, in.Body.input())
	if err != nil {
		return nil, err
	}
	return &body[contactResponse]{toContact(c)}, nil
}

func (s *Server) getContact(ctx context.Context, in *idPath) (*body[contactResponse], error) {
	c, err := s.core.Contacts.GetContact(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[contactResponse]{toContact(c)}, nil
}

func (s *Server) updateContact(ctx context.Context, in *patchContactInput) (*body[contactResponse], error) {
	r := in.Body
	ci := ports.ContactInput{FirstName: r.FirstName, LastName: r.LastName, Locale: r.Locale, Timezone: r.Timezone,
		Source: r.Source, Properties: r.Properties, ConsentStatus: r.ConsentStatus, ConsentSource: r.ConsentSource,
		ConsentIP: r.ConsentIP}
	if r.Email != nil {
		ci.Email = *r.Email
		if ci.Email == "" {
			ci.Email = " "
		}
	}
	c, err := s.core.Contacts.UpdateContact(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), ci)
	if err != nil {
		return nil, err
	}
	return &body[contactResponse]{toContact(c)}, nil
}

func (s *Server) deleteContact(ctx context.Context, in *idPath) (*body[deletedResponse], error) {
	if err := s.core.Contacts.DeleteContact(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID)); err != nil {
		return nil, err
	}
	return &body[deletedResponse]{deletedResponse{Deleted: true}}, nil
}

func (s *Server) listContacts(ctx context.Context, in *listContactsInput) (*body[contactList], error) {
	l, err := s.core.Contacts.ListContacts(ctx, principalFrom(ctx).OrganizationID, ports.ContactQuery{
		Limit: in.Limit, Offset: in.Offset, ConsentStatus: in.ConsentStatus, Search: in.Search})
	if err != nil {
		return nil, err
	}
	return &body[contactList]{contactList{items: mapItems(l.Data, toContact), envelope: in.Envelope, total: l.Total,
		limit: in.Limit, offset: in.Offset}}, nil
}

func (s *Server) importContacts(ctx context.Context, in *body[importRequest]) (*body[importResponse], error) {
	r := in.Body
	req := ports.ImportRequest{CSV: r.CSV, Upsert: r.Upsert, HasContacts: r.Contacts != nil}
	if r.Contacts != nil {
		req.Contacts = make([]ports.ContactInput, 0, len(*r.Contacts))
		for _, c := range *r.Contacts {
			req.Contacts = append(req.Contacts, c.input())
		}
	}
	res, err := s.core.Contacts.ImportContacts(ctx, principalFrom(ctx).OrganizationID, req)
	if err != nil {
		return nil, err
	}
	out := importResponse{Created: res.Created, Updated: res.Updated, Skipped: res.Skipped, Errors: []importRowError{}}
	for _, e := range res.Errors {
		re := importRowError{Index: e.Index, Message: e.Message, Details: []errorDetail{}}
		for _, d := range e.Details {
			re.Details = append(re.Details, errorDetail{Path: d.Path, Message: d.Message})
		}
		out.Errors = append(out.Errors, re)
	}
	return &body[importResponse]{out}, nil
}
