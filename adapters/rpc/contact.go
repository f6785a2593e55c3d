package rpc

import (
	"context"
	"encoding/json"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/ports"

	contactv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/contact/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/contact/v1/contactv1connect"
)

func init() {
	register(portService(func(c *ports.Core) *ports.ContactService { return &c.Contacts },
		contactv1connect.NewContactServiceHandler, newContactServer,
		contactv1connect.NewContactServiceClient, newContactClient).
		calledBy(contactv1connect.ContactServiceName, TierEdge))
	register(portService(func(c *ports.Core) *ports.PublicPreferenceService { return &c.Preferences },
		contactv1connect.NewPublicPreferenceServiceHandler, newPreferenceServer,
		contactv1connect.NewPublicPreferenceServiceClient, newPreferenceClient).
		calledBy(contactv1connect.PublicPreferenceServiceName, TierEdge))
}

// Conversions. Properties cross as a JSON object; numbers come back as float64, as the edge decodes them.

func propertiesToProto(m map[string]any) []byte {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}

func propertiesFromProto(b []byte) map[string]any {
	if b == nil {
		return nil
	}
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}

func contactToProto(c ports.Contact) *contactv1.Contact {
	return &contactv1.Contact{Id: c.ID, OrganizationId: c.OrganizationID, Email: c.Email, FirstName: c.FirstName,
		LastName: c.LastName, Locale: c.Locale, Timezone: c.Timezone, Source: c.Source,
		Properties: propertiesToProto(c.Properties), ConsentStatus: c.ConsentStatus, ConsentSource: c.ConsentSource,
		ConsentIp: c.ConsentIP, ConsentAt: timePtrToProto(c.ConsentAt), Bounced: c.Bounced,
		LastSentAt: timePtrToProto(c.LastSentAt), LastActiveAt: timePtrToProto(c.LastActiveAt),
		CreatedAt: timeToProto(c.CreatedAt), UpdatedAt: timeToProto(c.UpdatedAt)}
}

func contactFromProto(c *contactv1.Contact) ports.Contact {
	return ports.Contact{ID: c.GetId(), OrganizationID: c.GetOrganizationId(), Email: c.GetEmail(),
		FirstName: c.GetFirstName(), LastName: c.GetLastName(), Locale: c.GetLocale(), Timezone: c.GetTimezone(),
		Source: c.GetSource(), Properties: propertiesFromProto(c.GetProperties()), ConsentStatus: c.GetConsentStatus(),
		ConsentSource: c.GetConsentSource(), ConsentIP: c.GetConsentIp(), ConsentAt: timePtrFromProto(c.GetConsentAt()),
		Bounced: c.GetBounced(), LastSentAt: timePtrFromProto(c.GetLastSentAt()),
		LastActiveAt: timePtrFromProto(c.GetLastActiveAt()), CreatedAt: timeFromProto(c.GetCreatedAt()),
		UpdatedAt: timeFromProto(c.GetUpdatedAt())}
}

func contactsFromProto(cs []*contactv1.Contact) []ports.Contact {
	out := make([]ports.Contact, 0, len(cs))
	for _, c := range cs {
		out = append(out, contactFromProto(c))
	}
	return out
}

func contactsToProto(cs []ports.Contact) []*contactv1.Contact {
	out := make([]*contactv1.Contact, 0, len(cs))
	for _, c := range cs {
		out = append(out, contactToProto(c))
	}
	return out
}

func contactInputToProto(in ports.ContactInput) *contactv1.ContactInput {
	out := &contactv1.ContactInput{Email: in.Email, FirstName: in.FirstName, LastName: in.LastName, Locale: in.Locale,
		Timezone: in.Timezone, Source: in.Source, ConsentStatus: in.ConsentStatus, ConsentSource: in.ConsentSource,
		ConsentIp: in.ConsentIP}
	if in.Properties != nil {
		out.Properties = propertiesToProto(in.Properties)
	}
	return out
}

func contactInputFromProto(in *contactv1.ContactInput) ports.ContactInput {
	out := ports.ContactInput{Email: in.GetEmail(), FirstName: in.FirstName, LastName: in.LastName, Locale: in.Locale,
		Timezone: in.Timezone, Source: in.Source, ConsentStatus: in.ConsentStatus, ConsentSource: in.ConsentSource,
		ConsentIP: in.ConsentIp}
	if in.Properties != nil {
		out.Properties = propertiesFromProto(in.Properties)
		if out.Properties == nil {
			out.Properties = map[string]any{}
		}
	}
	return out
}

func preferencesToProto(p ports.Preferences) *contactv1.Preferences {
	out := &contactv1.Preferences{ContactId: p.ContactID, ConsentStatus: p.ConsentStatus}
	for _, t := range p.Topics {
		out.Topics = append(out.Topics, &contactv1.TopicPreference{TopicId: t.TopicID, Key: t.Key, Name: t.Name,
			Description: t.Description, Status: t.Status, Subscribed: t.Subscribed})
	}
	return out
}

func preferencesFromProto(p *contactv1.Preferences) ports.Preferences {
	out := ports.Preferences{ContactID: p.GetContactId(), ConsentStatus: p.GetConsentStatus(), Topics: []ports.TopicPreference{}}
	for _, t := range p.GetTopics() {
		out.Topics = append(out.Topics, ports.TopicPreference{TopicID: t.GetTopicId(), Key: t.GetKey(), Name: t.GetName(),
			Description: t.GetDescription(), Status: t.GetStatus(), Subscribed: t.GetSubscribed()})
	}
	return out
}

func preferenceUpdateToProto(u ports.PreferenceUpdate) *contactv1.PreferenceUpdate {
	out := &contactv1.PreferenceUpdate{UnsubscribeAll: u.UnsubscribeAll, Source: u.Source, Ip: u.IP}
	for _, t := range u.Topics {
		out.Topics = append(out.Topics, &contactv1.TopicChoice{Key: t.Key, Subscribed: t.Subscribed})
	}
	return out
}

func preferenceUpdateFromProto(u *contactv1.PreferenceUpdate) ports.PreferenceUpdate {
	out := ports.PreferenceUpdate{UnsubscribeAll: u.GetUnsubscribeAll(), Source: u.GetSource(), IP: u.GetIp()}
	for _, t := range u.GetTopics() {
		out.Topics = append(out.Topics, ports.TopicChoice{Key: t.GetKey(), Subscribed: t.GetSubscribed()})
	}
	return out
}

func confirmationFromProto(r *contactv1.Confirmation) ports.PublicConfirmation {
	return ports.PublicConfirmation{TopicKey: r.GetTopicKey(), TopicName: r.GetTopicName(), Status: r.GetStatus()}
}

func confirmationToProto(c ports.PublicConfirmation) *contactv1.Confirmation {
	return &contactv1.Confirmation{TopicKey: c.TopicKey, TopicName: c.TopicName, Status: c.Status}
}

// contactServer serves postmill.contact.v1.ContactService from a ports.ContactService.
type contactServer struct {
	svc ports.ContactService
	log *slog.Logger
}

func newContactServer(svc ports.ContactService, log *slog.Logger) contactv1connect.ContactServiceHandler {
	return &contactServer{svc: svc, log: log}
}

func (s *contactServer) CreateContact(ctx context.Context, req *connect.Request[contactv1.CreateContactRequest]) (*connect.Response[contactv1.CreateContactResponse], error) {
	c, err := s.svc.CreateContact(ctx, req.Msg.GetOrganizationId(), contactInputFromProto(req.Msg.GetInput()))
	return respond(ctx, s.log, req, err, func() *contactv1.CreateContactResponse {
		return &contactv1.CreateContactResponse{Contact: contactToProto(c)}
	})
}

func (s *contactServer) GetContact(ctx context.Context, req *connect.Request[contactv1.GetContactRequest]) (*connect.Response[contactv1.GetContactResponse], error) {
	c, err := s.svc.GetContact(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *contactv1.GetContactResponse {
		return &contactv1.GetContactResponse{Contact: contactToProto(c)}
	})
}

func (s *contactServer) UpdateContact(ctx context.Context, req *connect.Request[contactv1.UpdateContactRequest]) (*connect.Response[contactv1.UpdateContactResponse], error) {
	c, err := s.svc.UpdateContact(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), contactInputFromProto(req.Msg.GetInput()))
	return respond(ctx, s.log, req, err, func() *contactv1.UpdateContactResponse {
		return &contactv1.UpdateContactResponse{Contact: contactToProto(c)}
	})
}

func (s *contactServer) DeleteContact(ctx context.Context, req *connect.Request[contactv1.DeleteContactRequest]) (*connect.Response[contactv1.DeleteContactResponse], error) {
	err := s.svc.DeleteContact(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, empty[contactv1.DeleteContactResponse])
}

func (s *contactServer) ListContacts(ctx context.Context, req *connect.Request[contactv1.ListContactsRequest]) (*connect.Response[contactv1.ListContactsResponse], error) {
	m := req.Msg
	l, err := s.svc.ListContacts(ctx, m.GetOrganizationId(), ports.ContactQuery{Limit: int(m.GetLimit()), Offset: int(m.GetOffset()),
		ConsentStatus: m.GetConsentStatus(), Search: m.GetSearch()})
	return respond(ctx, s.log, req, err, func() *contactv1.ListContactsResponse {
		return &contactv1.ListContactsResponse{Data: contactsToProto(l.Data), Total: int64(l.Total), Limit: int64(l.Limit), Offset: int64(l.Offset)}
	})
}

func (s *contactServer) ImportContacts(ctx context.Context, req *connect.Request[contactv1.ImportContactsRequest]) (*connect.Response[contactv1.ImportContactsResponse], error) {
	m := req.Msg
	ir := ports.ImportRequest{HasContacts: m.GetHasContacts(), CSV: m.Csv, Upsert: m.Upsert}
	for _, c := range m.GetContacts() {
		ir.Contacts = append(ir.Contacts, contactInputFromProto(c))
	}
	res, err := s.svc.ImportContacts(ctx, m.GetOrganizationId(), ir)
	return respond(ctx, s.log, req, err, func() *contactv1.ImportContactsResponse {
		out := &contactv1.ImportContactsResponse{Created: int64(res.Created), Updated: int64(res.Updated), Skipped: int64(res.Skipped)}
		for _, e := range res.Errors {
			re := &contactv1.ImportRowError{Index: int64(e.Index), Message: e.Message}
			for _, d := range e.Details {
				re.Details = append(re.Details, &contactv1.FieldViolation{Path: d.Path, Message: d.Message})
			}
			out.Errors = append(out.Errors, re)
		}
		return out
	})
}

func (s *contactServer) ExportPage(ctx context.Context, req *connect.Request[contactv1.ExportPageRequest]) (*connect.Response[contactv1.ExportPageResponse], error) {
	cs, err := s.svc.ExportContactsPage(ctx, req.Msg.GetOrganizationId(), req.Msg.GetAfterId(), int(req.Msg.GetLimit()))
	return respond(ctx, s.log, req, err, func() *contactv1.ExportPageResponse {
		return &contactv1.ExportPageResponse{Contacts: contactsToProto(cs)}
	})
}

func (s *contactServer) GetPreferences(ctx context.Context, req *connect.Request[contactv1.GetPreferencesRequest]) (*connect.Response[contactv1.GetPreferencesResponse], error) {
	p, err := s.svc.ContactPreferences(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId())
	return respond(ctx, s.log, req, err, func() *contactv1.GetPreferencesResponse {
		return &contactv1.GetPreferencesResponse{Preferences: preferencesToProto(p)}
	})
}

func (s *contactServer) UpdatePreferences(ctx context.Context, req *connect.Request[contactv1.UpdatePreferencesRequest]) (*connect.Response[contactv1.UpdatePreferencesResponse], error) {
	p, err := s.svc.UpdateContactPreferences(ctx, req.Msg.GetOrganizationId(), req.Msg.GetId(), preferenceUpdateFromProto(req.Msg.GetUpdate()))
	return respond(ctx, s.log, req, err, func() *contactv1.UpdatePreferencesResponse {
		return &contactv1.UpdatePreferencesResponse{Preferences: preferencesToProto(p)}
	})
}

// contactClient implements ports.ContactService over postmill.contact.v1.ContactService.
type contactClient struct {
	conn contactv1connect.ContactServiceClient
}

func newContactClient(conn contactv1connect.ContactServiceClient) ports.ContactService {
	return &contactClient{conn: conn}
}

type contactMessage interface{ GetContact() *contactv1.Contact }

func getContact[R contactMessage](r R) ports.Contact { return contactFromProto(r.GetContact()) }

func (c *contactClient) CreateContact(ctx context.Context, orgID string, in ports.ContactInput) (ports.Contact, error) {
	return call(ctx, contactv1connect.ContactServiceCreateContactProcedure, c.conn.CreateContact,
		&contactv1.CreateContactRequest{OrganizationId: orgID, Input: contactInputToProto(in)}, getContact[*contactv1.CreateContactResponse])
}

func (c *contactClient) GetContact(ctx context.Context, orgID, id string) (ports.Contact, error) {
	return call(ctx, contactv1connect.ContactServiceGetContactProcedure, c.conn.GetContact,
		&contactv1.GetContactRequest{OrganizationId: orgID, Id: id}, getContact[*contactv1.GetContactResponse])
}

func (c *contactClient) UpdateContact(ctx context.Context, orgID, id string, in ports.ContactInput) (ports.Contact, error) {
	return call(ctx, contactv1connect.ContactServiceUpdateContactProcedure, c.conn.UpdateContact,
		&contactv1.UpdateContactRequest{OrganizationId: orgID, Id: id, Input: contactInputToProto(in)}, getContact[*contactv1.UpdateContactResponse])
}

func (c *contactClient) DeleteContact(ctx context.Context, orgID, id string) error {
	return exec(ctx, contactv1connect.ContactServiceDeleteContactProcedure, c.conn.DeleteContact,
		&contactv1.DeleteContactRequest{OrganizationId: orgID, Id: id})
}

func (c *contactClient) ListContacts(ctx context.Context, orgID string, q ports.ContactQuery) (ports.ContactList, error) {
	return call(ctx, contactv1connect.ContactServiceListContactsProcedure, c.conn.ListContacts,
		&contactv1.ListContactsRequest{OrganizationId: orgID, Limit: int64(q.Limit), Offset: int64(q.Offset),
			ConsentStatus: q.ConsentStatus, Search: q.Search},
		func(r *contactv1.ListContactsResponse) ports.ContactList {
			return ports.ContactList{Data: contactsFromProto(r.GetData()), Total: int(r.GetTotal()), Limit: int(r.GetLimit()), Offset: int(r.GetOffset())}
		})
}

func (c *contactClient) ImportContacts(ctx context.Context, orgID string, req ports.ImportRequest) (ports.ImportResult, error) {
	msg := &contactv1.ImportContactsRequest{OrganizationId: orgID, HasContacts: req.HasContacts, Csv: req.CSV, Upsert: req.Upsert}
	for _, in := range req.Contacts {
		msg.Contacts = append(msg.Contacts, contactInputToProto(in))
	}
	return call(ctx, contactv1connect.ContactServiceImportContactsProcedure, c.conn.ImportContacts, msg,
		func(r *contactv1.ImportContactsResponse) ports.ImportResult {
			out := ports.ImportResult{Created: int(r.GetCreated()), Updated: int(r.GetUpdated()), Skipped: int(r.GetSkipped()),
				Errors: []ports.ImportRowError{}}
			for _, e := range r.GetErrors() {
				re := ports.ImportRowError{Index: int(e.GetIndex()), Message: e.GetMessage()}
				for _, d := range e.GetDetails() {
					re.Details = append(re.Details, ports.FieldViolation{Path: d.GetPath(), Message: d.GetMessage()})
				}
				out.Errors = append(out.Errors, re)
			}
			return out
		})
}

func (c *contactClient) ExportContactsPage(ctx context.Context, orgID, afterID string, limit int) ([]ports.Contact, error) {
	return call(ctx, contactv1connect.ContactServiceExportPageProcedure, c.conn.ExportPage,
		&contactv1.ExportPageRequest{OrganizationId: orgID, AfterId: afterID, Limit: int64(limit)},
		func(r *contactv1.ExportPageResponse) []ports.Contact { return contactsFromProto(r.GetContacts()) })
}

type preferencesMessage interface{ GetPreferences() *contactv1.Preferences }

func getPreferences[R preferencesMessage](r R) ports.Preferences {
	return preferencesFromProto(r.GetPreferences())
}

func (c *contactClient) ContactPreferences(ctx context.Context, orgID, contactID string) (ports.Preferences, error) {
	return call(ctx, contactv1connect.ContactServiceGetPreferencesProcedure, c.conn.GetPreferences,
		&contactv1.GetPreferencesRequest{OrganizationId: orgID, Id: contactID}, getPreferences[*contactv1.GetPreferencesResponse])
}

func (c *contactClient) UpdateContactPreferences(ctx context.Context, orgID, contactID string, u ports.PreferenceUpdate) (ports.Preferences, error) {
	return call(ctx, contactv1connect.ContactServiceUpdatePreferencesProcedure, c.conn.UpdatePreferences,
		&contactv1.UpdatePreferencesRequest{OrganizationId: orgID, Id: contactID, Update: preferenceUpdateToProto(u)}, getPreferences[*contactv1.UpdatePreferencesResponse])
}

// preferenceServer serves postmill.contact.v1.PublicPreferenceService.
type preferenceServer struct {
	svc ports.PublicPreferenceService
	log *slog.Logger
}

func newPreferenceServer(svc ports.PublicPreferenceService, log *slog.Logger) contactv1connect.PublicPreferenceServiceHandler {
	return &preferenceServer{svc: svc, log: log}
}

func (s *preferenceServer) GetPublicPreferences(ctx context.Context, req *connect.Request[contactv1.GetPublicPreferencesRequest]) (*connect.Response[contactv1.GetPublicPreferencesResponse], error) {
	p, err := s.svc.PublicPreferences(ctx, string(req.Msg.GetToken()))
	return respond(ctx, s.log, req, err, func() *contactv1.GetPublicPreferencesResponse {
		return &contactv1.GetPublicPreferencesResponse{Preferences: preferencesToProto(p)}
	})
}

func (s *preferenceServer) UpdatePublicPreferences(ctx context.Context, req *connect.Request[contactv1.UpdatePublicPreferencesRequest]) (*connect.Response[contactv1.UpdatePublicPreferencesResponse], error) {
	p, err := s.svc.UpdatePublicPreferences(ctx, string(req.Msg.GetToken()), preferenceUpdateFromProto(req.Msg.GetUpdate()))
	return respond(ctx, s.log, req, err, func() *contactv1.UpdatePublicPreferencesResponse {
		return &contactv1.UpdatePublicPreferencesResponse{Preferences: preferencesToProto(p)}
	})
}

func (s *preferenceServer) GetConfirmation(ctx context.Context, req *connect.Request[contactv1.GetConfirmationRequest]) (*connect.Response[contactv1.GetConfirmationResponse], error) {
	c, err := s.svc.GetConfirmation(ctx, string(req.Msg.GetToken()))
	return respond(ctx, s.log, req, err, func() *contactv1.GetConfirmationResponse {
		return &contactv1.GetConfirmationResponse{Confirmation: confirmationToProto(c)}
	})
}

func (s *preferenceServer) Confirm(ctx context.Context, req *connect.Request[contactv1.ConfirmRequest]) (*connect.Response[contactv1.ConfirmResponse], error) {
	c, err := s.svc.ConfirmTopic(ctx, string(req.Msg.GetToken()), req.Msg.GetIp())
	return respond(ctx, s.log, req, err, func() *contactv1.ConfirmResponse {
		return &contactv1.ConfirmResponse{Confirmation: confirmationToProto(c)}
	})
}

// preferenceClient implements ports.PublicPreferenceService over the wire; tokens travel byte for byte.
type preferenceClient struct {
	conn contactv1connect.PublicPreferenceServiceClient
}

func newPreferenceClient(conn contactv1connect.PublicPreferenceServiceClient) ports.PublicPreferenceService {
	return &preferenceClient{conn: conn}
}

func (c *preferenceClient) PublicPreferences(ctx context.Context, token string) (ports.Preferences, error) {
	return call(ctx, contactv1connect.PublicPreferenceServiceGetPublicPreferencesProcedure, c.conn.GetPublicPreferences,
		&contactv1.GetPublicPreferencesRequest{Token: []byte(token)}, getPreferences[*contactv1.GetPublicPreferencesResponse])
}

func (c *preferenceClient) UpdatePublicPreferences(ctx context.Context, token string, u ports.PreferenceUpdate) (ports.Preferences, error) {
	return call(ctx, contactv1connect.PublicPreferenceServiceUpdatePublicPreferencesProcedure, c.conn.UpdatePublicPreferences,
		&contactv1.UpdatePublicPreferencesRequest{Token: []byte(token), Update: preferenceUpdateToProto(u)}, getPreferences[*contactv1.UpdatePublicPreferencesResponse])
}

func (c *preferenceClient) GetConfirmation(ctx context.Context, token string) (ports.PublicConfirmation, error) {
	return call(ctx, contactv1connect.PublicPreferenceServiceGetConfirmationProcedure, c.conn.GetConfirmation,
		&contactv1.GetConfirmationRequest{Token: []byte(token)}, func(r *contactv1.GetConfirmationResponse) ports.PublicConfirmation {
			return confirmationFromProto(r.GetConfirmation())
		})
}

func (c *preferenceClient) ConfirmTopic(ctx context.Context, token, ip string) (ports.PublicConfirmation, error) {
	return call(ctx, contactv1connect.PublicPreferenceServiceConfirmProcedure, c.conn.Confirm,
		&contactv1.ConfirmRequest{Token: []byte(token), Ip: ip}, func(r *contactv1.ConfirmResponse) ports.PublicConfirmation {
			return confirmationFromProto(r.GetConfirmation())
		})
}
