package marketing

import (
	"context"
	"testing"

	"github.com/postmill/postmill/ports"
)

// pageStore records the page the topic and segment lists hand the store.
type pageStore struct {
	ports.TopicStore
	ports.SegmentStore
	limit, offset int
}

func (s *pageStore) ListTopics(_ context.Context, _ string, limit, offset int) ([]ports.Topic, error) {
	s.limit, s.offset = limit, offset
	return nil, nil
}

func (s *pageStore) ListSegments(_ context.Context, _ string, limit, offset int) ([]ports.Segment, error) {
	s.limit, s.offset = limit, offset
	return nil, nil
}

// TestListsCheckThePage: the topic and segment lists default the limit to 25, pass the page to the store,
// and refuse a limit outside 1-100 or a negative offset before reaching it.
func TestListsCheckThePage(t *testing.T) {
	st := &pageStore{limit: -7}
	svc, err := New(Deps{Contacts: struct{ ports.ContactStore }{}, Topics: st, Segments: st, Keyring: testKeyring(t, "0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lists := map[string]func(limit, offset int) error{
		"topics":   func(l, o int) error { _, err := svc.Topics.ListTopics(ctx, "org", l, o); return err },
		"segments": func(l, o int) error { _, err := svc.Segments.ListSegments(ctx, "org", l, o); return err },
	}
	for name, list := range lists {
		if err := list(0, 0); err != nil || st.limit != ports.DefaultListLimit || st.offset != 0 {
			t.Errorf("%s default: limit %d offset %d, %v", name, st.limit, st.offset, err)
		}
		if err := list(2, 30); err != nil || st.limit != 2 || st.offset != 30 {
			t.Errorf("%s page: limit %d offset %d, %v", name, st.limit, st.offset, err)
		}
		st.limit = -7
		for _, c := range []struct {
			limit, offset int
			path          string
		}{{101, 0, "limit"}, {-1, 0, "limit"}, {1, -1, "offset"}} {
			err := list(c.limit, c.offset)
			if e, ok := ports.AsError(err); !ok || e.Code != ports.CodeInvalidArgument || len(e.Details) != 1 || e.Details[0].Path != c.path {
				t.Errorf("%s limit %d offset %d: %v", name, c.limit, c.offset, err)
			}
			if st.limit != -7 {
				t.Errorf("%s limit %d offset %d reached the store", name, c.limit, c.offset)
			}
		}
	}
}
