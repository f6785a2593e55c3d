-- +goose Up
-- DMARC aggregate reports (RFC 7489 appendix C) mailed to POSTMILL_DMARC_RUA, one copy per organization
-- owning the reported domain. A reporter's report id is stored once per organization, so a report mailed
-- twice counts once.
CREATE TABLE dmarc_reports (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    reporter_org    text        NOT NULL,
    reporter_email  text        NOT NULL DEFAULT '',
    report_id       text        NOT NULL,
    domain          text        NOT NULL,
    policy          text        NOT NULL DEFAULT '',
    begin_at        timestamptz NOT NULL,
    end_at          timestamptz NOT NULL,
    received_at     timestamptz NOT NULL,
    CONSTRAINT dmarc_reports_pkey PRIMARY KEY (id),
    CONSTRAINT dmarc_reports_org_reporter_report_key UNIQUE (organization_id, reporter_org, report_id)
);

CREATE INDEX dmarc_reports_org_end_idx ON dmarc_reports (organization_id, end_at);

CREATE TABLE dmarc_records (
    report_id    uuid    NOT NULL REFERENCES dmarc_reports (id) ON DELETE CASCADE,
    position     integer NOT NULL,
    source_ip    text    NOT NULL,
    count        bigint  NOT NULL,
    disposition  text    NOT NULL,
    dkim_aligned boolean NOT NULL,
    spf_aligned  boolean NOT NULL,
    header_from  text    NOT NULL,
    dkim_result  text    NOT NULL,
    spf_result   text    NOT NULL,
    CONSTRAINT dmarc_records_pkey PRIMARY KEY (report_id, position)
);

-- +goose Down
DROP TABLE dmarc_records;
DROP TABLE dmarc_reports;
