package marketing

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/postmill/postmill/ports"
)

// Import messages.
const (
	msgImportOneOf   = "exactly one of contacts and csv is required"
	msgImportRows    = "must have at most 10000 rows"
	msgImportCSVSize = "must be at most 8 MiB"
	msgImportNoEmail = "must have a header row with an email column"
	msgImportCSV     = "is not valid CSV"
)

// ImportContacts validates every row like a single create, collapses duplicate emails (the last occurrence wins)
// and writes the rest in one transaction (SPEC §4.7). Bad rows are reported by zero-based index and
// skipped. Skipped counts every row not written: bad rows, earlier occurrences of a duplicate email, and
// existing contacts when upsert is false; so created + updated + skipped is the number of rows.
func (s *Contacts) ImportContacts(ctx context.Context, orgID string, req ports.ImportRequest) (ports.ImportResult, error) {
	hasCSV := req.CSV != nil
	if req.HasContacts == hasCSV {
		return ports.ImportResult{}, ports.ValidationError(ports.FieldViolation{Message: msgImportOneOf})
	}
	rows := req.Contacts
	if hasCSV {
		if len(*req.CSV) > ports.MaxImportCSVBytes {
			return ports.ImportResult{}, ports.ValidationError(ports.FieldViolation{Path: "csv", Message: msgImportCSVSize})
		}
		var err error
		if rows, err = ParseCSV(*req.CSV); err != nil {
			return ports.ImportResult{}, err
		}
	} else if len(rows) > ports.MaxImportRows {
		return ports.ImportResult{}, ports.ValidationError(ports.FieldViolation{Path: "contacts", Message: msgImportRows})
	}
	upsert := req.Upsert == nil || *req.Upsert
	res := ports.ImportResult{Errors: []ports.ImportRowError{}}
	prefix := "contacts."
	if hasCSV {
		prefix = "csv."
	}
	valid := make([]ports.ContactInput, 0, len(rows))
	last := make(map[string]int, len(rows))
	for i := range rows {
		in := rows[i]
		if v := checkContact(fmt.Sprintf("%s%d.", prefix, i), &in, true); len(v) > 0 {
			res.Errors = append(res.Errors, ports.ImportRowError{Index: i, Message: ports.MessageValidationFailed, Details: v})
			res.Skipped++
			continue
		}
		if in.Source == nil {
			src := "import"
			in.Source = &src
		}
		if j, dup := last[in.Email]; dup {
			valid[j] = in
			res.Skipped++
			continue
		}
		last[in.Email] = len(valid)
		valid = append(valid, in)
	}
	if len(valid) == 0 {
		return res, nil
	}
	created, updated, skipped, err := s.contacts.ImportContacts(ctx, orgID, valid, upsert, s.now())
	if err != nil {
		return ports.ImportResult{}, err
	}
	res.Created, res.Updated, res.Skipped = created, updated, res.Skipped+skipped
	return res, nil
}

// ParseCSV reads an import document: a header row with an email column (matched case-insensitively), then
// one contact per row. Known headers map to contact fields, any other to properties.<header> with the
// header's case kept; empty cells are omitted. More than 10,000 rows, no email column or malformed CSV
// is a 400 at path csv.
func ParseCSV(doc string) ([]ports.ContactInput, error) {
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(doc, "\ufeff")))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	bad := func(msg string) error { return ports.ValidationError(ports.FieldViolation{Path: "csv", Message: msg}) }
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, bad(msgImportNoEmail)
	}
	if err != nil {
		return nil, bad(msgImportCSV)
	}
	cols := make([]string, len(header))
	props := make([]string, len(header))
	hasEmail := false
	for i, h := range header {
		h = strings.TrimSpace(h)
		switch strings.ToLower(h) {
		case "email":
			cols[i], hasEmail = "email", true
		case "first_name", "firstname":
			cols[i] = "firstName"
		case "last_name", "lastname":
			cols[i] = "lastName"
		case "locale", "timezone", "source":
			cols[i] = strings.ToLower(h)
		case "consent_status", "consentstatus":
			cols[i] = "consentStatus"
		case "":
			cols[i] = "-"
		default:
			cols[i], props[i] = "property", h
		}
	}
	if !hasEmail {
		return nil, bad(msgImportNoEmail)
	}
	var rows []ports.ContactInput
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, bad(msgImportCSV)
		}
		if len(rows) == ports.MaxImportRows {
			return nil, bad(msgImportRows)
		}
		var in ports.ContactInput
		for i, cell := range rec {
			if i >= len(cols) || cell == "" {
				continue
			}
			v := cell
			switch cols[i] {
			case "email":
				in.Email = v
			case "firstName":
				in.FirstName = &v
			case "lastName":
				in.LastName = &v
			case "locale":
				in.Locale = &v
			case "timezone":
				in.Timezone = &v
			case "source":
				in.Source = &v
			case "consentStatus":
				v = strings.ToLower(strings.TrimSpace(v))
				in.ConsentStatus = &v
			case "property":
				if in.Properties == nil {
					in.Properties = map[string]any{}
				}
				in.Properties[props[i]] = v
			}
		}
		rows = append(rows, in)
	}
	return rows, nil
}
