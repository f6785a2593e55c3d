package ports

// Page sizes of every paged list (SPEC §8: limit 1-100, default 25): DefaultListLimit when the caller gives
// none, MaxListLimit at most.
const (
	DefaultListLimit = 25
	MaxListLimit     = 100
)
