-- name: CurrentSchema :one
-- The schema migrations land in; it keys the migration lock so that separate schemas migrate in parallel.
SELECT COALESCE(current_schema(), '')::text AS schema;
