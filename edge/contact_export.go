package edge

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// exportPageSize is how many contacts the export asks the core for at a time: the CSV is written page by
// page, so the edge holds one page however many contacts the organization has.
const exportPageSize = 1000

// exportColumns are the columns of SPEC §2, in order.
var exportColumns = []string{"email", "first_name", "last_name", "locale", "timezone", "source", "consent_status",
	"consent_at", "bounced", "properties"}

// neutralizeCell defuses a cell a spreadsheet would read as a formula (SPEC §4.7: cells starting with =, +,
// - or @) by prefixing an apostrophe.
func neutralizeCell(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@') {
		return "'" + s
	}
	return s
}

func exportRecord(c ports.Contact) []string {
	consentAt := ""
	if c.ConsentAt != nil {
		consentAt = c.ConsentAt.UTC().Format(time.RFC3339)
	}
	props := []byte("{}")
	if len(c.Properties) > 0 {
		if b, err := json.Marshal(c.Properties); err == nil {
			props = b
		}
	}
	rec := []string{c.Email, c.FirstName, c.LastName, c.Locale, c.Timezone, c.Source, c.ConsentStatus, consentAt,
		strconv.FormatBool(c.Bounced), string(props)}
	for i := range rec {
		rec[i] = neutralizeCell(rec[i])
	}
	return rec
}

func (s *Server) registerContactExport(read access) {
	register(s, huma.Operation{
		OperationID: "export-contacts", Method: http.MethodGet, Path: "/v1/contacts/export",
		Tags: []string{tagContacts}, Summary: "Export contacts as CSV",
		Description: "A text/csv attachment with the columns email, first_name, last_name, locale, timezone, source, " +
			"consent_status, consent_at, bounced, properties (a JSON object), one contact per row in id order. Cells " +
			"starting with =, +, - or @ are prefixed with an apostrophe so spreadsheets do not run them. The file " +
			"is streamed as it is read.",
		Responses: map[string]*huma.Response{"200": {
			Description: "The CSV document",
			Content:     map[string]*huma.MediaType{"text/csv": {Schema: &huma.Schema{Type: huma.TypeString}}},
		}},
	}, read, s.exportContacts)
}

func (s *Server) exportContacts(ctx context.Context, _ *struct{}) (*huma.StreamResponse, error) {
	orgID := principalFrom(ctx).OrganizationID
	// The first page is read before the answer starts, so a failure is still an error status.
	first, err := s.core.Contacts.ExportContactsPage(ctx, orgID, "", exportPageSize)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hc huma.Context) {
		hc.SetHeader("Content-Type", "text/csv; charset=utf-8")
		hc.SetHeader("Content-Disposition", `attachment; filename="contacts.csv"`)
		hc.SetHeader("Cache-Control", "no-store")
		hc.SetStatus(http.StatusOK)
		bw := hc.BodyWriter()
		w := csv.NewWriter(bw)
		_ = w.Write(exportColumns)
		page := first
		for {
			for _, c := range page {
				if w.Write(exportRecord(c)) != nil {
					return
				}
			}
			w.Flush()
			if w.Error() != nil || len(page) < exportPageSize {
				return
			}
			if f, ok := bw.(http.Flusher); ok {
				f.Flush()
			}
			if page, err = s.core.Contacts.ExportContactsPage(hc.Context(), orgID, page[len(page)-1].ID, exportPageSize); err != nil {
				// The status is sent: ending the body early is all that is left, and the client sees a
				// truncated download rather than a complete-looking one.
				panic(http.ErrAbortHandler)
			}
		}
	}}, nil
}

// The preferences of a contact (GET and PATCH /v1/contacts/{id}/preferences) and of the public preference
// page share these shapes.

type topicChoiceRequest struct {
	_          struct{} `json:"-" additionalProperties:"true"`
	Key        string   `json:"key" doc:"The topic's key"`
	Subscribed bool     `json:"subscribed" doc:"true to subscribe, false to leave"`
}

type preferencesRequest struct {
	_              struct{}             `json:"-" additionalProperties:"true"`
	Topics         []topicChoiceRequest `json:"topics,omitempty" maxItems:"200" doc:"At most 200 topics, by key"`
	UnsubscribeAll bool                 `json:"unsubscribeAll,omitempty" doc:"Unsubscribe from every marketing message: consentStatus becomes unsubscribed"`
}

func (r preferencesRequest) update() ports.PreferenceUpdate {
	u := ports.PreferenceUpdate{UnsubscribeAll: r.UnsubscribeAll}
	for _, t := range r.Topics {
		u.Topics = append(u.Topics, ports.TopicChoice{Key: t.Key, Subscribed: t.Subscribed})
	}
	return u
}

type topicPreferenceResponse struct {
	Key         string `json:"key" doc:"The topic's key"`
	Name        string `json:"name" doc:"The topic's name"`
	Description string `json:"description" doc:"The topic's description"`
	Status      string `json:"status" enum:"pending,subscribed,unsubscribed," doc:"The subscription's status; empty when the contact never subscribed"`
	Subscribed  bool   `json:"subscribed" doc:"true when the subscription counts: subscribed, and the contact's consent is subscribed"`
}

type preferencesResponse struct {
	ConsentStatus string                    `json:"consentStatus" enum:"subscribed,unsubscribed,pending" doc:"The contact's consent to marketing mail"`
	Topics        []topicPreferenceResponse `json:"topics" nullable:"false" doc:"Every topic of the organization, by key"`
}

func toPreferences(p ports.Preferences) preferencesResponse {
	out := preferencesResponse{ConsentStatus: p.ConsentStatus, Topics: []topicPreferenceResponse{}}
	for _, t := range p.Topics {
		out.Topics = append(out.Topics, topicPreferenceResponse{Key: t.Key, Name: t.Name, Description: t.Description,
			Status: t.Status, Subscribed: t.Subscribed})
	}
	return out
}

type updatePreferencesInput struct {
	ID   string `path:"id" format:"uuid" doc:"Contact id"`
	Body preferencesRequest
}

func (s *Server) getContactPreferences(ctx context.Context, in *idPath) (*body[preferencesResponse], error) {
	p, err := s.core.Contacts.ContactPreferences(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID))
	if err != nil {
		return nil, err
	}
	return &body[preferencesResponse]{toPreferences(p)}, nil
}

func (s *Server) updateContactPreferences(ctx context.Context, in *updatePreferencesInput) (*body[preferencesResponse], error) {
	p, err := s.core.Contacts.UpdateContactPreferences(ctx, principalFrom(ctx).OrganizationID, canonicalUUID(in.ID), in.Body.update())
	if err != nil {
		return nil, err
	}
	return &body[preferencesResponse]{toPreferences(p)}, nil
}
