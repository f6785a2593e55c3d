-- +goose Up
-- applied_jobs only has to remember a job id for as long as the job could be delivered again (a lease or
-- two); the core prunes older rows, and this index keeps that cheap.
CREATE INDEX applied_jobs_applied_at_idx ON applied_jobs (applied_at);

-- +goose Down
DROP INDEX applied_jobs_applied_at_idx;
