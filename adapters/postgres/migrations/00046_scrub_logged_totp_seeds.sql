-- +goose Up
-- The request log kept the otpauth:// URL of a TOTP enrolment's answer, seed included (the secret field
-- itself was redacted). The edge redacts it now; the answers logged before lose their bodies here.
UPDATE analytics_requests SET response_body = '[redacted]'
WHERE route = '/v1/auth/2fa/enroll' AND response_body LIKE '%otpauth%';

-- +goose Down
-- Nothing to restore: the seeds are gone.
SELECT 1;
