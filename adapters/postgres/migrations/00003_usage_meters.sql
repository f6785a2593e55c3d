-- +goose Up
-- Usage meters count metered work (metric "emails_sent") per organization and period. The send path
-- increments a row atomically with INSERT ... ON CONFLICT; an absent row means nothing was metered.
CREATE TABLE usage_meters (
    organization_id uuid   NOT NULL,
    metric          text   NOT NULL,
    period_start    date   NOT NULL,
    value           bigint NOT NULL DEFAULT 0,
    CONSTRAINT usage_meters_pkey PRIMARY KEY (organization_id, metric, period_start),
    CONSTRAINT usage_meters_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

-- +goose Down
DROP TABLE usage_meters;
