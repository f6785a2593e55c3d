package marketing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestParseCSVMapsHeaders(t *testing.T) {
	rows, err := ParseCSV("\ufeffEMAIL,FirstName,last_name,Consent_Status,Plan,Seats\n" +
		"a@x.test,Ann,,Unsubscribed,pro,\n" +
		"b@x.test,,Bee,,,3\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Email != "a@x.test" || *rows[0].FirstName != "Ann" || rows[0].LastName != nil ||
		*rows[0].ConsentStatus != "unsubscribed" || rows[0].Properties["Plan"] != "pro" || len(rows[0].Properties) != 1 {
		t.Fatalf("row 0 = %+v", rows[0])
	}
	if *rows[1].LastName != "Bee" || rows[1].Properties["Seats"] != "3" {
		t.Fatalf("row 1 = %+v", rows[1])
	}
	for doc, msg := range map[string]string{
		"":                    msgImportNoEmail,
		"name,plan\nx,y\n":    msgImportNoEmail,
		"email\n\"unclosed\n": msgImportCSV,
		"email\n" + strings.Repeat("a@x.test\n", ports.MaxImportRows+1): msgImportRows,
	} {
		_, err := ParseCSV(doc)
		e, ok := ports.AsError(err)
		if !ok || len(e.Details) != 1 || e.Details[0].Path != "csv" || e.Details[0].Message != msg {
			t.Errorf("%.30q: %v", doc, err)
		}
	}
}

// importStore records what Import hands the store.
type importStore struct {
	ports.ContactStore
	rows   []ports.ContactInput
	upsert bool
}

func (s *importStore) ImportContacts(_ context.Context, _ string, rows []ports.ContactInput, upsert bool, _ time.Time) (int, int, int, error) {
	s.rows, s.upsert = rows, upsert
	return len(rows), 0, 0, nil
}

func TestImportValidatesCollapsesAndReportsByIndex(t *testing.T) {
	st := &importStore{}
	svc, err := New(Deps{Contacts: st, Topics: struct{ ports.TopicStore }{}, Segments: struct{ ports.SegmentStore }{}, Keyring: testKeyring(t, "0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	csv := "email,first_name\nA@x.test,First\nbad\nb@x.test,\na@x.test,Last\nc@x.test," + strings.Repeat("n", 201) + "\n"
	res, err := svc.Contacts.ImportContacts(context.Background(), "org", ports.ImportRequest{CSV: &csv})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.rows) != 2 || st.rows[0].Email != "a@x.test" || *st.rows[0].FirstName != "Last" || *st.rows[0].Source != "import" || !st.upsert {
		t.Fatalf("rows = %+v", st.rows)
	}
	if res.Created != 2 || res.Skipped != 3 || len(res.Errors) != 2 || res.Errors[0].Index != 1 || res.Errors[1].Index != 4 ||
		res.Errors[1].Details[0].Path != "csv.4.firstName" {
		t.Fatalf("result = %+v", res)
	}
	for name, req := range map[string]ports.ImportRequest{
		"neither":  {},
		"both":     {CSV: &csv, HasContacts: true},
		"too many": {HasContacts: true, Contacts: make([]ports.ContactInput, ports.MaxImportRows+1)},
	} {
		if _, err := svc.Contacts.ImportContacts(context.Background(), "org", req); ports.ErrorCode(err) != ports.CodeInvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestContactValidation(t *testing.T) {
	long := strings.Repeat("x", 321)
	props := map[string]any{}
	for i := range 101 {
		props[strings.Repeat("k", 1)+string(rune('A'+i%26))+strings.Repeat("z", i/26)] = 1.0
	}
	cases := map[string]ports.ContactInput{
		"email":             {Email: "a\r\nb@x.test"},
		"email ":            {Email: long + "@x.test"},
		"email  ":           {Email: "no-at-sign"},
		"firstName":         {Email: "a@x.test", FirstName: strPtr(strings.Repeat("é", 201))},
		"locale":            {Email: "a@x.test", Locale: strPtr(strings.Repeat("a", 36))},
		"consentStatus":     {Email: "a@x.test", ConsentStatus: strPtr("maybe")},
		"properties":        {Email: "a@x.test", Properties: props},
		"properties.nested": {Email: "a@x.test", Properties: map[string]any{"nested": map[string]any{}}},
		"properties.long":   {Email: "a@x.test", Properties: map[string]any{"long": strings.Repeat("v", 1025)}},
	}
	for path, in := range cases {
		v := checkContact("", &in, true)
		if len(v) != 1 || v[0].Path != strings.TrimSpace(path) {
			t.Errorf("%s: %+v", path, v)
		}
	}
	in := ports.ContactInput{Email: "  Ann@Example.TEST "}
	if v := checkContact("", &in, true); len(v) != 0 || in.Email != "ann@example.test" {
		t.Fatalf("normalised %q, %+v", in.Email, v)
	}
}

func strPtr(s string) *string { return &s }
