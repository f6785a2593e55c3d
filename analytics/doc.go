// Package analytics is Postmill's analytics tier: it will read the event and request-log stream into the
// analytics store and answer logs, analytics and reputation queries. Until that work lands, the composition
// root runs the tier as an idle service so that `--target=analytics` starts and stops cleanly.
package analytics
