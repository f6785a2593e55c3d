-- +goose Up
-- The expander's lease on a sending broadcast (docs/marketing.md, "One expander per broadcast"). Every core
-- process runs an expander; a claim gives each sending broadcast to one of them: it sets a token unique to
-- the claim and the end of the lease (database time), and no other claim takes the broadcast while the
-- lease lasts. The holder extends the lease with each recorded page, only while the token is still its own,
-- and ends it when it stops working the broadcast (the token is cleared, expander_lease_until is left at
-- the time the lease ended, which orders the next claims). A process that dies keeps its lease until it
-- runs out; then another process claims the broadcast and resumes from the cursor.
ALTER TABLE broadcasts
    ADD COLUMN expander_token uuid,
    ADD COLUMN expander_lease_until timestamptz;

-- +goose Down
ALTER TABLE broadcasts
    DROP COLUMN expander_lease_until,
    DROP COLUMN expander_token;
