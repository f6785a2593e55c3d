package ports

// progress ranks the states a recipient moves through while its mail is under way or after it arrived:
// a message is as far along as its least advanced recipient.
var progress = map[MessageStatus]int{
	StatusScheduled:       0,
	StatusQueued:          1,
	StatusDeliveryDelayed: 2,
	StatusSent:            3,
	StatusDelivered:       4,
	StatusOpened:          5,
	StatusClicked:         6,
	StatusComplained:      7,
}

// DeriveMessageStatus is the one rule that turns a message's recipients' statuses into the message's status.
// Among recipients that have not ended in failure, the least advanced state wins, in the order
// queued < delivery_delayed < sent < delivered (scheduled before queued; opened, clicked and complained after
// delivered): the message is "delivered" only when every live recipient is. Failure states (bounced, failed,
// cancelled) count only when every recipient has one: a message with one bounced and one delivered recipient
// is delivered, not bounced. When all have failed, bounced wins over failed (a server refused at least one
// address, the more useful thing to know), and failed over cancelled. Unknown or empty statuses are ignored;
// with nothing to judge the result is "" (the store then derives the status itself).
//
// It lives in ports, pure and table-tested, because the store applies it inside the transaction that locks
// the message: two jobs of one message reporting at once must each see the other's recipients.
func DeriveMessageStatus(statuses []MessageStatus) MessageStatus {
	var (
		least                             MessageStatus
		leastRank                         int
		bounced, failed, cancelled, alive bool
	)
	for _, st := range statuses {
		if rank, ok := progress[st]; ok {
			if !alive || rank < leastRank {
				least, leastRank = st, rank
			}
			alive = true
			continue
		}
		switch st {
		case StatusBounced:
			bounced = true
		case StatusFailed:
			failed = true
		case StatusCancelled:
			cancelled = true
		}
	}
	switch {
	case alive:
		return least
	case bounced:
		return StatusBounced
	case failed:
		return StatusFailed
	case cancelled:
		return StatusCancelled
	}
	return ""
}

// EngagementAdvances reports whether a recipient in state current moves to next (opened, clicked or
// complained) when that event arrives: only a recipient whose mail was handed over or delivered, or who
// engaged less far already, moves, and never backwards (a click after a complaint leaves it complained).
// Failure states (bounced, failed, cancelled) stay: the event is still recorded on the timeline.
func EngagementAdvances(current, next MessageStatus) bool {
	switch current {
	case StatusSent, StatusDelivered, StatusOpened, StatusClicked:
	default:
		return false
	}
	n, ok := progress[next]
	return ok && n > progress[current]
}
