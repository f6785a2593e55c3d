// Package analytics is Postmill's analytics tier: the service behind GET /v1/logs and GET /v1/analytics
// over a ports.AnalyticsStore, the pipeline that copies message events from their source (the PostgreSQL
// outbox, or the Kafka events topic with the Enricher adding each message's sending domain and tags) into
// the store in batches, and the maintenance loop that prepares daily partitions and applies the retention.
// docs/analytics.md describes it.
package analytics
