package ports

import "context"

// TrackingService answers the tracking routes the edge serves for any Host (GET /t/o/<token> and
// GET /t/c/<token>). Tokens are sealed: they carry no readable id or address.
type TrackingService interface {
	// Open records email.opened for the token's recipient, once per message (later opens change nothing).
	// Errors: invalid_argument (a token Postmill did not make), not_found (the message is gone).
	Open(ctx context.Context, token string) error
	// Click records email.clicked (url, link_id, recipient_id) and returns the URL recorded at send time,
	// the only place the edge redirects to. Errors: invalid_argument, not_found (message or link gone).
	Click(ctx context.Context, token string) (url string, err error)
}

// TrackingStore is what tracking reads and writes.
type TrackingStore interface {
	// MessageHTML returns the HTML body stored with the message at send time. Errors: not_found.
	MessageHTML(ctx context.Context, orgID, messageID string) (string, error)
	// RecordEngagement writes ev (email.opened or email.clicked, with RecipientID set) under the message's
	// lock. With once, the event is not written when the message already has an event of ev.Type. Either
	// way the recipient's status moves to the event's status when EngagementAdvances allows it, and the
	// message status is derived again, so a message every recipient opened is "opened" though only the
	// first open made an event. recorded tells whether ev was written. Errors: not_found, invalid_argument
	// (not an email.* event).
	RecordEngagement(ctx context.Context, ev Event, once bool) (recorded bool, err error)
}
