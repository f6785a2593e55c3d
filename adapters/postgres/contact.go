package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postmill/postmill/ports"
)

var _ ports.ContactStore = (*Marketing)(nil)

// contactColumns is the select list scanContact reads, over contacts c.
const contactColumns = `c.id, c.organization_id, c.email, c.first_name, c.last_name, c.locale, c.timezone, c.source,
	c.properties, c.consent_status, c.consent_source, c.consent_ip, c.consent_at, c.bounced, c.last_sent_at,
	c.last_active_at, c.created_at, c.updated_at`

func scanContact(row pgx.Row) (ports.Contact, error) {
	var c ports.Contact
	var props []byte
	err := row.Scan(&c.ID, &c.OrganizationID, &c.Email, &c.FirstName, &c.LastName, &c.Locale, &c.Timezone, &c.Source,
		&props, &c.ConsentStatus, &c.ConsentSource, &c.ConsentIP, &c.ConsentAt, &c.Bounced, &c.LastSentAt,
		&c.LastActiveAt, &c.CreatedAt, &c.UpdatedAt)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(props, &c.Properties); err != nil {
		return c, fmt.Errorf("postgres: contact properties: %w", err)
	}
	return c, nil
}

func collectContacts(rows pgx.Rows) ([]ports.Contact, error) {
	defer rows.Close()
	out := []ports.Contact{}
	for rows.Next() {
		c, err := scanContact(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, listError(rows.Err())
}

func propsJSON(p map[string]any) ([]byte, error) {
	if p == nil {
		return nil, nil
	}
	return json.Marshal(p)
}

// CreateContact implements ports.ContactStore.
func (s *Marketing) CreateContact(ctx context.Context, c ports.Contact) (ports.Contact, error) {
	props, err := propsJSON(c.Properties)
	if err != nil {
		return ports.Contact{}, err
	}
	if props == nil {
		props = []byte("{}")
	}
	row := s.pool.QueryRow(ctx, `INSERT INTO contacts AS c (id, organization_id, email, first_name, last_name, locale,
		timezone, source, properties, consent_status, consent_source, consent_ip, consent_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		RETURNING `+contactColumns,
		c.ID, c.OrganizationID, c.Email, c.FirstName, c.LastName, c.Locale, c.Timezone, c.Source, props,
		c.ConsentStatus, c.ConsentSource, c.ConsentIP, c.ConsentAt, c.CreatedAt, c.UpdatedAt)
	out, err := scanContact(row)
	return out, interpretErrorFor("contact", err)
}

// GetContact implements ports.ContactStore.
func (s *Marketing) GetContact(ctx context.Context, orgID, id string) (ports.Contact, error) {
	c, err := scanContact(s.pool.QueryRow(ctx, `SELECT `+contactColumns+` FROM contacts c
		WHERE c.organization_id = $1 AND c.id = $2`, orgID, id))
	return c, interpretErrorFor("contact", err)
}

// GetContactByEmail implements ports.ContactStore.
func (s *Marketing) GetContactByEmail(ctx context.Context, orgID, email string) (ports.Contact, error) {
	c, err := scanContact(s.pool.QueryRow(ctx, `SELECT `+contactColumns+` FROM contacts c
		WHERE c.organization_id = $1 AND c.email = $2`, orgID, email))
	return c, interpretErrorFor("contact", err)
}

// UpdateContact implements ports.ContactStore: absent fields are NULL parameters and keep their value.
func (s *Marketing) UpdateContact(ctx context.Context, orgID, id string, in ports.ContactInput, now time.Time) (ports.Contact, error) {
	props, err := propsJSON(in.Properties)
	if err != nil {
		return ports.Contact{}, err
	}
	row := s.pool.QueryRow(ctx, `UPDATE contacts AS c SET
		first_name = coalesce($3, c.first_name), last_name = coalesce($4, c.last_name),
		locale = coalesce($5, c.locale), timezone = coalesce($6, c.timezone), source = coalesce($7, c.source),
		properties = coalesce($8::jsonb, c.properties),
		consent_at = CASE WHEN $9::text IS DISTINCT FROM c.consent_status AND $9::text IS NOT NULL THEN $12 ELSE c.consent_at END,
		consent_status = coalesce($9, c.consent_status),
		consent_source = coalesce($10, c.consent_source), consent_ip = coalesce($11, c.consent_ip),
		updated_at = $12
		WHERE c.organization_id = $1 AND c.id = $2
		RETURNING `+contactColumns,
		orgID, id, in.FirstName, in.LastName, in.Locale, in.Timezone, in.Source, props, in.ConsentStatus,
		in.ConsentSource, in.ConsentIP, now)
	c, err := scanContact(row)
	return c, interpretErrorFor("contact", err)
}

// DeleteContact implements ports.ContactStore; the subscriptions go with the contact.
func (s *Marketing) DeleteContact(ctx context.Context, orgID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM contacts WHERE organization_id = $1 AND id = $2`, orgID, id)
	if err != nil {
		return interpretErrorFor("contact", err)
	}
	if tag.RowsAffected() == 0 {
		return ports.NotFound("contact not found")
	}
	return nil
}

// ListContacts implements ports.ContactStore: one page by offset, newest first, and the count of matches.
func (s *Marketing) ListContacts(ctx context.Context, orgID string, q ports.ContactQuery) (ports.ContactList, error) {
	where := `c.organization_id = $1 AND ($2 = '' OR c.consent_status = $2)
		AND ($3 = '' OR c.email LIKE $4 ESCAPE '\' OR c.first_name ILIKE $4 ESCAPE '\' OR c.last_name ILIKE $4 ESCAPE '\')`
	pattern := strings.ToLower(likePattern(q.Search))
	args := []any{orgID, q.ConsentStatus, q.Search, pattern}
	list := ports.ContactList{Limit: q.Limit, Offset: q.Offset}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM contacts c WHERE `+where, args...).Scan(&list.Total); err != nil {
		return list, listError(err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+contactColumns+` FROM contacts c WHERE `+where+`
		ORDER BY c.created_at DESC, c.id DESC LIMIT $5 OFFSET $6`, append(args, q.Limit, q.Offset)...)
	if err != nil {
		return list, listError(err)
	}
	list.Data, err = collectContacts(rows)
	return list, err
}

// ExportContacts implements ports.ContactStore: a keyset page by id.
func (s *Marketing) ExportContacts(ctx context.Context, orgID, afterID string, limit int) ([]ports.Contact, error) {
	if afterID == "" {
		afterID = "00000000-0000-0000-0000-000000000000"
	}
	rows, err := s.pool.Query(ctx, `SELECT `+contactColumns+` FROM contacts c
		WHERE c.organization_id = $1 AND c.id > $2 ORDER BY c.id LIMIT $3`, orgID, afterID, limit)
	if err != nil {
		return nil, listError(err)
	}
	return collectContacts(rows)
}

// ImportContacts implements ports.ContactStore: the rows are copied into a staging table and written with
// one set-based UPDATE of the existing emails (when upsert) and one INSERT ... ON CONFLICT DO NOTHING of
// the rest, all in one transaction. An upserted row changes only the fields it sets (an absent consent
// status keeps the stored one), and its properties are merged into the stored ones.
func (s *Marketing) ImportContacts(ctx context.Context, orgID string, rows []ports.ContactInput, upsert bool, now time.Time) (created, updated, skipped int, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE contact_import (
			id uuid, email text, first_name text, last_name text, locale text, timezone text, source text,
			properties jsonb, consent_status text, consent_source text, consent_ip text) ON COMMIT DROP`); err != nil {
			return err
		}
		src := make([][]any, 0, len(rows))
		for _, r := range rows {
			props, err := propsJSON(r.Properties)
			if err != nil {
				return err
			}
			var p any
			if props != nil {
				p = string(props)
			}
			src = append(src, []any{idOrNew(""), r.Email, r.FirstName, r.LastName, r.Locale, r.Timezone, r.Source, p,
				r.ConsentStatus, r.ConsentSource, r.ConsentIP})
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"contact_import"}, []string{"id", "email", "first_name",
			"last_name", "locale", "timezone", "source", "properties", "consent_status", "consent_source", "consent_ip"},
			pgx.CopyFromRows(src)); err != nil {
			return err
		}
		if upsert {
			tag, err := tx.Exec(ctx, `UPDATE contacts AS c SET
				first_name = coalesce(i.first_name, c.first_name),
				last_name = coalesce(i.last_name, c.last_name),
				locale = coalesce(i.locale, c.locale),
				timezone = coalesce(i.timezone, c.timezone),
				source = coalesce(i.source, c.source),
				properties = c.properties || coalesce(i.properties, '{}'),
				consent_at = CASE WHEN i.consent_status IS NOT NULL AND i.consent_status <> c.consent_status
				                  THEN $2 ELSE c.consent_at END,
				consent_status = coalesce(i.consent_status, c.consent_status),
				consent_source = coalesce(i.consent_source, c.consent_source),
				consent_ip = coalesce(i.consent_ip, c.consent_ip),
				updated_at = $2
				FROM contact_import i
				WHERE c.organization_id = $1 AND c.email = i.email`, orgID, now)
			if err != nil {
				return err
			}
			updated = int(tag.RowsAffected())
		}
		tag, err := tx.Exec(ctx, `INSERT INTO contacts AS c (id, organization_id, email, first_name, last_name, locale,
			timezone, source, properties, consent_status, consent_source, consent_ip, consent_at, created_at, updated_at)
			SELECT id, $1, email, coalesce(first_name, ''), coalesce(last_name, ''), coalesce(locale, ''),
			       coalesce(timezone, ''), coalesce(source, ''), coalesce(properties, '{}'),
			       coalesce(consent_status, 'subscribed'), coalesce(consent_source, ''), coalesce(consent_ip, ''), $2, $2, $2
			  FROM contact_import
			ON CONFLICT (organization_id, email) DO NOTHING`, orgID, now)
		if err != nil {
			return err
		}
		created = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, 0, 0, interpretError(err)
	}
	return created, updated, len(rows) - created - updated, nil
}
