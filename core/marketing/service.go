package marketing

import (
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/id"
	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// Deps are the driven ports of the marketing audience services. Every store and the keyring are required;
// Clock defaults to the wall clock.
type Deps struct {
	Contacts ports.ContactStore
	Topics   ports.TopicStore
	Segments ports.SegmentStore
	Keyring  *secret.Keyring
	Clock    ports.Clock
}

// Services are the four use cases of the area, sharing one set of dependencies.
type Services struct {
	Contacts *Contacts
	Topics   *Topics
	Segments *Segments
	Public   *Public
}

// base is what every service of the area holds.
type base struct {
	contacts ports.ContactStore
	topics   ports.TopicStore
	segments ports.SegmentStore
	keyring  *secret.Keyring
	clock    ports.Clock
}

// Contacts is ports.ContactService.
type Contacts struct{ *base }

// Topics is ports.TopicService.
type Topics struct{ *base }

// Segments is ports.SegmentService.
type Segments struct{ *base }

// Public is ports.PublicPreferenceService: the token-gated /p/prefs and /p/confirm pages.
type Public struct{ *base }

var (
	_ ports.ContactService          = (*Contacts)(nil)
	_ ports.TopicService            = (*Topics)(nil)
	_ ports.SegmentService          = (*Segments)(nil)
	_ ports.PublicPreferenceService = (*Public)(nil)
)

// New builds the services.
func New(d Deps) (*Services, error) {
	if d.Contacts == nil || d.Topics == nil || d.Segments == nil {
		return nil, errors.New("marketing: contact, topic and segment stores are required")
	}
	if d.Keyring == nil {
		return nil, errors.New("marketing: a keyring is required")
	}
	if d.Clock == nil {
		d.Clock = ports.SystemClock{}
	}
	b := &base{contacts: d.Contacts, topics: d.Topics, segments: d.Segments, keyring: d.Keyring, clock: d.Clock}
	return &Services{Contacts: &Contacts{b}, Topics: &Topics{b}, Segments: &Segments{b}, Public: &Public{b}}, nil
}

// now is the clock's time in UTC at PostgreSQL's microsecond resolution.
func (b *base) now() time.Time { return b.clock.Now().UTC().Truncate(time.Microsecond) }

var newID = id.New

// validID reports whether s is a UUID: anything else names no row, so the store need not be asked.
func validID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil
}

// notFound is the 404 of a record that is not the organization's.
func notFound(what string) error { return ports.NotFound("%s not found", what) }
