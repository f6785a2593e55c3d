package marketing

import (
	"context"
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
	// Confirmations, when set, lets a double opt-in topic that names a From address (Topic.ConfirmFrom)
	// mail each pending subscription its confirmation link through the send path. Without it a topic
	// cannot name one, and the application mails the link itself.
	Confirmations *Confirmations
}

// Confirmations is what mailing a confirmation link needs: the organization's sending domains (the From
// address must be at a verified one), the send path (so suppressions, the plan's allowance and the
// warm-up cap apply as to any mail), and the public base URL of the /p links.
type Confirmations struct {
	Domains interface {
		DomainByName(ctx context.Context, orgID, name string) (ports.Domain, error)
	}
	Emails interface {
		Send(ctx context.Context, orgID string, req ports.SendRequest) (ports.SendResult, error)
	}
	BaseURL string
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
	contacts      ports.ContactStore
	topics        ports.TopicStore
	segments      ports.SegmentStore
	keyring       *secret.Keyring
	clock         ports.Clock
	confirmations *Confirmations
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
	if c := d.Confirmations; c != nil && (c.Domains == nil || c.Emails == nil || c.BaseURL == "") {
		return nil, errors.New("marketing: confirmations need domains, the send path and a base URL")
	}
	b := &base{contacts: d.Contacts, topics: d.Topics, segments: d.Segments, keyring: d.Keyring, clock: d.Clock,
		confirmations: d.Confirmations}
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
