package marketing

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// FuzzImportCSV feeds any document to a CSV import, as a hostile file would arrive. Whatever it holds,
// the import does not panic, either refuses the whole document with a 400 at path csv and hands the store
// nothing, or hands it only rows PostgreSQL can keep and §2 allows (a normalised, unique address; bounded,
// storable names and properties), and accounts for every data row: written, or skipped with its index.
func FuzzImportCSV(f *testing.F) {
	for _, seed := range []string{
		"email,first_name,last_name,plan,score\na@x.test,Ann,Lee,pro,3\n",
		"\ufeffEMAIL,FirstName,Consent_Status\n A@X.Test ,Ann,Unsubscribed\r\nb@x.test,,bogus\r\n",
		"email,email,\n\"a@x.test\",\"b@x.test\",\"multi\nline\"\n",
		"email,\"quoted \"\"header\"\"\",locale\na@x.test,v,\x00\nc@x.test,\xff\xfe,en\n",
		"name\nx\n",
		"email\n\"unclosed\n",
		"email,plan\na@x.test,free\nA@x.test,team\na@x.test\n",
	} {
		f.Add(seed)
	}
	k, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		st := &importStore{}
		svc, err := New(Deps{Contacts: st, Topics: struct{ ports.TopicStore }{}, Segments: struct{ ports.SegmentStore }{}, Keyring: k})
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.Contacts.ImportContacts(context.Background(), "org", ports.ImportRequest{CSV: &doc})
		if err != nil {
			e, ok := ports.AsError(err)
			if !ok || e.Code != ports.CodeInvalidArgument || len(e.Details) != 1 || e.Details[0].Path != "csv" {
				t.Fatalf("refused with %v", err)
			}
			if st.rows != nil {
				t.Fatalf("a refused document handed the store %d rows", len(st.rows))
			}
			return
		}
		parsed, perr := ParseCSV(doc)
		if perr != nil {
			t.Fatalf("import accepted what ParseCSV refuses: %v", perr)
		}
		if len(st.rows) > ports.MaxImportRows {
			t.Fatalf("%d rows handed to the store", len(st.rows))
		}
		seen := map[string]bool{}
		for _, r := range st.rows {
			if r.Email != NormalizeEmail(r.Email) || r.Email == "" || len(r.Email) > ports.MaxContactEmailLen ||
				strings.ContainsAny(r.Email, "\r\n") || !storable(r.Email) {
				t.Fatalf("address %q handed to the store", r.Email)
			}
			if seen[r.Email] {
				t.Fatalf("address %q handed to the store twice", r.Email)
			}
			seen[r.Email] = true
			for _, f := range []struct {
				v     *string
				limit int
			}{{r.FirstName, ports.MaxContactNameLen}, {r.LastName, ports.MaxContactNameLen}, {r.Locale, ports.MaxContactLocaleLen},
				{r.Timezone, ports.MaxContactTimezoneLen}, {r.Source, ports.MaxContactSourceLen}} {
				if f.v != nil && (!storable(*f.v) || utf8.RuneCountInString(*f.v) > f.limit) {
					t.Fatalf("field %q handed to the store", *f.v)
				}
			}
			if r.ConsentStatus != nil && !validConsent(*r.ConsentStatus) {
				t.Fatalf("consent status %q handed to the store", *r.ConsentStatus)
			}
			if len(r.Properties) > ports.MaxContactProperties {
				t.Fatalf("%d properties handed to the store", len(r.Properties))
			}
			for key, v := range r.Properties {
				s, _ := v.(string) // a CSV cell is always a string
				if key == "" || !storable(key) || utf8.RuneCountInString(key) > ports.MaxContactPropertyKey ||
					!storable(s) || utf8.RuneCountInString(s) > ports.MaxContactPropertyValue {
					t.Fatalf("property %q = %q handed to the store", key, s)
				}
			}
		}
		// Every data row is written or skipped (the store here creates every row it is handed), and each
		// refused row is reported once, in order, by its index and with paths under it.
		if res.Created != len(st.rows) || res.Created+res.Updated+res.Skipped != len(parsed) {
			t.Fatalf("created %d, updated %d, skipped %d of %d rows (%d handed to the store)",
				res.Created, res.Updated, res.Skipped, len(parsed), len(st.rows))
		}
		last := -1
		for _, e := range res.Errors {
			if e.Index <= last || e.Index >= len(parsed) || len(e.Details) == 0 {
				t.Fatalf("row error %+v after index %d of %d rows", e, last, len(parsed))
			}
			last = e.Index
			for _, d := range e.Details {
				if !strings.HasPrefix(d.Path, fmt.Sprintf("csv.%d.", e.Index)) {
					t.Fatalf("row %d reported at path %q", e.Index, d.Path)
				}
			}
		}
	})
}

// FuzzOpenPublicToken opens any string as each purpose's /p/* token, as a link typed or altered by hand
// would arrive. Only a token this keyring sealed for that purpose opens; anything else is the one
// "invalid token" error, which says nothing of which check failed, and never a panic.
func FuzzOpenPublicToken(f *testing.F) {
	k, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := SealPublicToken(k, PurposeUnsubscribe, PublicToken{OrganizationID: "0190a000-0000-7000-8000-000000000001",
		ContactID: "0190a000-0000-7000-8000-000000000002", TopicID: "0190a000-0000-7000-8000-000000000003"})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{sealed, sealed[:len(sealed)-1], sealed + "A", strings.ToUpper(sealed), "", "====", strings.Repeat("A", 300)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		opened := 0
		for _, purpose := range []string{PurposeUnsubscribe, PurposeConfirm, PurposePrefs} {
			got, err := OpenPublicToken(k, purpose, tok)
			if err != nil {
				if e, ok := ports.AsError(err); !ok || e.Code != ports.CodeInvalidArgument || e.Message != "invalid token" || len(e.Details) != 0 {
					t.Fatalf("%s: %v", purpose, err)
				}
				continue
			}
			opened++
			if purpose != PurposeUnsubscribe || got.OrganizationID != "0190a000-0000-7000-8000-000000000001" ||
				got.ContactID != "0190a000-0000-7000-8000-000000000002" || got.TopicID != "0190a000-0000-7000-8000-000000000003" || got.BroadcastID != "" {
				t.Fatalf("%q opened as %s: %+v", tok, purpose, got)
			}
		}
		if opened > 1 {
			t.Fatalf("%q opened for %d purposes", tok, opened)
		}
	})
}
