package sending

// domainKey names a sending domain within its organization, the key of Service.domainCache. The send path
// reads the organization and the from-domain on every call and keeps them in lookup caches
// (core/lookupcache) for Config.LookupCacheTTL; it caches only answers that let a send proceed (an active
// organization, a verified domain), so a change that unblocks sending is seen at once. Any other change (a
// pause, a new plan, a suspension) is forgotten as soon as the change feed reports it (Service.changed): at
// once in the process that made it, moments later in the others, and within the ttl whatever happens to
// the feed.
type domainKey struct {
	orgID string
	name  string
}
