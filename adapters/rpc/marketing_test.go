package rpc_test

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/postmill/postmill/ports"
)

// marketingAnswers are what the fake core answers for the contact, topic, segment and public preference
// services, kept beside fakeCore so that the marketing area adds a file rather than growing the fake.
type marketingAnswers struct {
	contact      ports.Contact
	contacts     []ports.Contact
	list         ports.ContactList
	imported     ports.ImportResult
	prefs        ports.Preferences
	confirmation ports.PublicConfirmation
	topic        ports.Topic
	topics       []ports.Topic
	subscription ports.SubscriptionResult
	segment      ports.Segment
	segments     []ports.Segment
	preview      ports.SegmentPreview
}

var marketingByFake sync.Map // *fakeCore -> *marketingAnswers

func (f *fakeCore) mk() *marketingAnswers {
	a, _ := marketingByFake.LoadOrStore(f, &marketingAnswers{})
	return a.(*marketingAnswers)
}

func (f *fakeCore) CreateContact(ctx context.Context, orgID string, in ports.ContactInput) (ports.Contact, error) {
	return f.mk().contact, f.record(ctx, "CreateContact", orgID, in)
}
func (f *fakeCore) GetContact(ctx context.Context, orgID, id string) (ports.Contact, error) {
	return f.mk().contact, f.record(ctx, "GetContact", orgID, id)
}
func (f *fakeCore) UpdateContact(ctx context.Context, orgID, id string, in ports.ContactInput) (ports.Contact, error) {
	return f.mk().contact, f.record(ctx, "UpdateContact", orgID, id, in)
}
func (f *fakeCore) DeleteContact(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteContact", orgID, id)
}
func (f *fakeCore) ListContacts(ctx context.Context, orgID string, q ports.ContactQuery) (ports.ContactList, error) {
	return f.mk().list, f.record(ctx, "ListContacts", orgID, q)
}
func (f *fakeCore) ImportContacts(ctx context.Context, orgID string, r ports.ImportRequest) (ports.ImportResult, error) {
	return f.mk().imported, f.record(ctx, "ImportContacts", orgID, r)
}
func (f *fakeCore) ExportContactsPage(ctx context.Context, orgID, after string, limit int) ([]ports.Contact, error) {
	return f.mk().contacts, f.record(ctx, "ExportContactsPage", orgID, after, limit)
}
func (f *fakeCore) ContactPreferences(ctx context.Context, orgID, id string) (ports.Preferences, error) {
	return f.mk().prefs, f.record(ctx, "ContactPreferences", orgID, id)
}
func (f *fakeCore) UpdateContactPreferences(ctx context.Context, orgID, id string, u ports.PreferenceUpdate) (ports.Preferences, error) {
	return f.mk().prefs, f.record(ctx, "UpdateContactPreferences", orgID, id, u)
}
func (f *fakeCore) PublicPreferences(ctx context.Context, token string) (ports.Preferences, error) {
	return f.mk().prefs, f.record(ctx, "PublicPreferences", token)
}
func (f *fakeCore) UpdatePublicPreferences(ctx context.Context, token string, u ports.PreferenceUpdate) (ports.Preferences, error) {
	return f.mk().prefs, f.record(ctx, "UpdatePublicPreferences", token, u)
}
func (f *fakeCore) GetConfirmation(ctx context.Context, token string) (ports.PublicConfirmation, error) {
	return f.mk().confirmation, f.record(ctx, "GetConfirmation", token)
}
func (f *fakeCore) ConfirmTopic(ctx context.Context, token, ip string) (ports.PublicConfirmation, error) {
	return f.mk().confirmation, f.record(ctx, "ConfirmTopic", token, ip)
}
func (f *fakeCore) CreateTopic(ctx context.Context, orgID string, in ports.TopicInput) (ports.Topic, error) {
	return f.mk().topic, f.record(ctx, "CreateTopic", orgID, in)
}
func (f *fakeCore) GetTopic(ctx context.Context, orgID, id string) (ports.Topic, error) {
	return f.mk().topic, f.record(ctx, "GetTopic", orgID, id)
}
func (f *fakeCore) ListTopics(ctx context.Context, orgID string, limit, offset int) ([]ports.Topic, error) {
	return f.mk().topics, f.record(ctx, "ListTopics", orgID, limit, offset)
}
func (f *fakeCore) UpdateTopic(ctx context.Context, orgID, id string, in ports.TopicInput) (ports.Topic, error) {
	return f.mk().topic, f.record(ctx, "UpdateTopic", orgID, id, in)
}
func (f *fakeCore) DeleteTopic(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteTopic", orgID, id)
}
func (f *fakeCore) SubscribeTopic(ctx context.Context, orgID, id string, r ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	return f.mk().subscription, f.record(ctx, "SubscribeTopic", orgID, id, r)
}
func (f *fakeCore) UnsubscribeTopic(ctx context.Context, orgID, id string, r ports.SubscriptionRequest) (ports.SubscriptionResult, error) {
	return f.mk().subscription, f.record(ctx, "UnsubscribeTopic", orgID, id, r)
}
func (f *fakeCore) CreateSegment(ctx context.Context, orgID string, in ports.SegmentInput) (ports.Segment, error) {
	return f.mk().segment, f.record(ctx, "CreateSegment", orgID, in)
}
func (f *fakeCore) GetSegment(ctx context.Context, orgID, id string) (ports.Segment, error) {
	return f.mk().segment, f.record(ctx, "GetSegment", orgID, id)
}
func (f *fakeCore) ListSegments(ctx context.Context, orgID string, limit, offset int) ([]ports.Segment, error) {
	return f.mk().segments, f.record(ctx, "ListSegments", orgID, limit, offset)
}
func (f *fakeCore) UpdateSegment(ctx context.Context, orgID, id string, in ports.SegmentInput) (ports.Segment, error) {
	return f.mk().segment, f.record(ctx, "UpdateSegment", orgID, id, in)
}
func (f *fakeCore) DeleteSegment(ctx context.Context, orgID, id string) error {
	return f.record(ctx, "DeleteSegment", orgID, id)
}
func (f *fakeCore) PreviewRule(ctx context.Context, orgID string, rule json.RawMessage, limit int) (ports.SegmentPreview, error) {
	return f.mk().preview, f.record(ctx, "PreviewRule", orgID, rule, limit)
}
func (f *fakeCore) PreviewSegment(ctx context.Context, orgID, id string, limit int) (ports.SegmentPreview, error) {
	return f.mk().preview, f.record(ctx, "PreviewSegment", orgID, id, limit)
}

func sp(s string) *string { return &s }

// marketingRoundTrips cover every method of the four services, with optional fields set and unset.
func marketingRoundTrips() []roundTrip {
	contact := ports.Contact{ID: "c1", OrganizationID: "org1", Email: "ann@example.test", FirstName: "Ann",
		LastName: "Lee", Locale: "fr", Timezone: "Europe/Paris", Source: "api",
		Properties: map[string]any{"plan": "pro", "seats": 12.0, "vip": true, "none": nil}, ConsentStatus: "subscribed",
		ConsentSource: "form", ConsentIP: "192.0.2.1", ConsentAt: ptr(t0), Bounced: true, LastSentAt: ptr(t1),
		CreatedAt: t0, UpdatedAt: t1}
	bare := ports.Contact{ID: "c2", Properties: map[string]any{}}
	full := ports.ContactInput{Email: "ann@example.test", FirstName: sp("Ann"), LastName: sp(""), Locale: sp("fr"),
		Timezone: sp("UTC"), Source: sp("api"), Properties: map[string]any{"a": "b"}, ConsentStatus: sp("pending"),
		ConsentSource: sp("form"), ConsentIP: sp("::1")}
	prefs := ports.Preferences{ContactID: "c1", ConsentStatus: "subscribed", Topics: []ports.TopicPreference{
		{TopicID: "t1", Key: "news", Name: "News", Description: "d", Status: "pending"},
		{TopicID: "t2", Key: "deals", Name: "Deals", Status: "subscribed", Subscribed: true}}}
	update := ports.PreferenceUpdate{Topics: []ports.TopicChoice{{Key: "news", Subscribed: true}, {Key: "deals"}},
		UnsubscribeAll: true, Source: "preferences", IP: "192.0.2.9"}
	csv := "email\na@x.test\n"
	upsert := false
	topic := ports.Topic{ID: "t1", OrganizationID: "org1", Key: "news", Name: "News", Description: "All the news",
		DoubleOptIn: true, ConfirmFrom: "News <news@example.test>", CreatedAt: t0, UpdatedAt: t1}
	sub := ports.SubscriptionResult{ConfirmToken: "tok", ConfirmationEmailID: "m1", Subscription: ports.TopicSubscription{TopicID: "t1",
		ContactID: "c1", Email: "ann@example.test", Status: "pending", ConsentSource: "form", ConsentIP: "::1",
		CreatedAt: t0, UpdatedAt: t1}}
	refused := sub
	refused.ConfirmationEmailID, refused.ConfirmationError = "", &ports.Error{Code: ports.CodeInvalidArgument, Message: "recipient is suppressed"}
	seg := ports.Segment{ID: "s1", OrganizationID: "org1", Name: "Pro", Description: "d",
		Rule: json.RawMessage(`{"field":"properties.plan","cmp":"eq","value":"pro"}`), CreatedAt: t0, UpdatedAt: t1}
	rule := json.RawMessage(`{"op":"and","rules":[{"field":"topic.news","cmp":"eq"}]}`)
	bool2 := true

	var trips []roundTrip
	add := func(name, method string, answer func(*marketingAnswers), call func(context.Context, ports.Core) (any, error), want any, args ...any) {
		trips = append(trips, roundTrip{name: name, method: method, answer: func(f *fakeCore) { answer(f.mk()) }, call: call, want: want, args: args})
	}
	add("CreateContact", "CreateContact", func(a *marketingAnswers) { a.contact = contact },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.CreateContact(ctx, "org1", full)
		},
		contact, "org1", full)
	add("CreateContact/bare", "CreateContact", func(a *marketingAnswers) { a.contact = bare },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.CreateContact(ctx, "org1", ports.ContactInput{Email: "x@y.test"})
		}, bare, "org1", ports.ContactInput{Email: "x@y.test"})
	add("GetContact", "GetContact", func(a *marketingAnswers) { a.contact = contact },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Contacts.GetContact(ctx, "org1", "c1") },
		contact, "org1", "c1")
	add("UpdateContact", "UpdateContact", func(a *marketingAnswers) { a.contact = contact },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.UpdateContact(ctx, "org1", "c1", full)
		},
		contact, "org1", "c1", full)
	add("DeleteContact", "DeleteContact", func(*marketingAnswers) {},
		func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Contacts.DeleteContact(ctx, "org1", "c1")
		},
		nil, "org1", "c1")
	q := ports.ContactQuery{Limit: 10, Offset: 20, ConsentStatus: "pending", Search: "ann"}
	list := ports.ContactList{Data: []ports.Contact{contact, bare}, Total: 22, Limit: 10, Offset: 20}
	add("ListContacts", "ListContacts", func(a *marketingAnswers) { a.list = list },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Contacts.ListContacts(ctx, "org1", q) },
		list, "org1", q)
	imp := ports.ImportRequest{Contacts: []ports.ContactInput{full, {Email: "b@x.test"}}, HasContacts: true, Upsert: &upsert}
	res := ports.ImportResult{Created: 1, Updated: 2, Skipped: 3, Errors: []ports.ImportRowError{
		{Index: 4, Message: "Validation failed", Details: []ports.FieldViolation{{Path: "contacts.4.email", Message: "is required"}}}}}
	add("ImportContacts", "ImportContacts", func(a *marketingAnswers) { a.imported = res },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.ImportContacts(ctx, "org1", imp)
		},
		res, "org1", imp)
	impCSV := ports.ImportRequest{CSV: &csv}
	add("ImportContacts/csv", "ImportContacts", func(a *marketingAnswers) { a.imported = ports.ImportResult{Errors: []ports.ImportRowError{}} },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.ImportContacts(ctx, "org1", impCSV)
		},
		ports.ImportResult{Errors: []ports.ImportRowError{}}, "org1", impCSV)
	add("ExportContactsPage", "ExportContactsPage", func(a *marketingAnswers) { a.contacts = []ports.Contact{contact} },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.ExportContactsPage(ctx, "org1", "c0", 500)
		},
		[]ports.Contact{contact}, "org1", "c0", 500)
	add("ContactPreferences", "ContactPreferences", func(a *marketingAnswers) { a.prefs = prefs },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.ContactPreferences(ctx, "org1", "c1")
		},
		prefs, "org1", "c1")
	add("UpdateContactPreferences", "UpdateContactPreferences", func(a *marketingAnswers) { a.prefs = prefs },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Contacts.UpdateContactPreferences(ctx, "org1", "c1", update)
		}, prefs, "org1", "c1", update)
	for _, token := range []string{"sealed", "\xff\xfe bad"} {
		add("PublicPreferences", "PublicPreferences", func(a *marketingAnswers) { a.prefs = prefs },
			func(ctx context.Context, c ports.Core) (any, error) {
				return c.Preferences.PublicPreferences(ctx, token)
			},
			prefs, token)
		add("UpdatePublicPreferences", "UpdatePublicPreferences", func(a *marketingAnswers) { a.prefs = prefs },
			func(ctx context.Context, c ports.Core) (any, error) {
				return c.Preferences.UpdatePublicPreferences(ctx, token, update)
			}, prefs, token, update)
		conf := ports.PublicConfirmation{TopicKey: "news", TopicName: "News", Status: "subscribed"}
		add("GetConfirmation", "GetConfirmation", func(a *marketingAnswers) { a.confirmation = conf },
			func(ctx context.Context, c ports.Core) (any, error) { return c.Preferences.GetConfirmation(ctx, token) },
			conf, token)
		add("ConfirmTopic", "ConfirmTopic", func(a *marketingAnswers) { a.confirmation = conf },
			func(ctx context.Context, c ports.Core) (any, error) {
				return c.Preferences.ConfirmTopic(ctx, token, "::1")
			},
			conf, token, "::1")
	}
	tin := ports.TopicInput{Key: "news", Name: sp("News"), Description: sp(""), DoubleOptIn: &bool2, ConfirmFrom: sp("news@example.test")}
	add("CreateTopic", "CreateTopic", func(a *marketingAnswers) { a.topic = topic },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Topics.CreateTopic(ctx, "org1", tin) },
		topic, "org1", tin)
	add("GetTopic", "GetTopic", func(a *marketingAnswers) { a.topic = topic },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Topics.GetTopic(ctx, "org1", "t1") },
		topic, "org1", "t1")
	add("ListTopics", "ListTopics", func(a *marketingAnswers) { a.topics = []ports.Topic{topic} },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Topics.ListTopics(ctx, "org1", 7, 40) },
		[]ports.Topic{topic}, "org1", 7, 40)
	add("UpdateTopic", "UpdateTopic", func(a *marketingAnswers) { a.topic = topic },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Topics.UpdateTopic(ctx, "org1", "t1", ports.TopicInput{Name: sp("N")})
		}, topic, "org1", "t1", ports.TopicInput{Name: sp("N")})
	add("DeleteTopic", "DeleteTopic", func(*marketingAnswers) {},
		func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Topics.DeleteTopic(ctx, "org1", "t1")
		},
		nil, "org1", "t1")
	sr := ports.SubscriptionRequest{Email: "ann@example.test", ConsentSource: "form", ConsentIP: "::1"}
	add("SubscribeTopic", "SubscribeTopic", func(a *marketingAnswers) { a.subscription = sub },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Topics.SubscribeTopic(ctx, "org1", "t1", sr)
		},
		sub, "org1", "t1", sr)
	add("SubscribeTopic/refused", "SubscribeTopic", func(a *marketingAnswers) { a.subscription = refused },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Topics.SubscribeTopic(ctx, "org1", "t1", sr)
		},
		refused, "org1", "t1", sr)
	add("UnsubscribeTopic", "UnsubscribeTopic", func(a *marketingAnswers) { a.subscription = sub },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Topics.UnsubscribeTopic(ctx, "org1", "t1", ports.SubscriptionRequest{ContactID: "c1"})
		}, sub, "org1", "t1", ports.SubscriptionRequest{ContactID: "c1"})
	sin := ports.SegmentInput{Name: sp("Pro"), Description: sp("d"), Rule: rule}
	add("CreateSegment", "CreateSegment", func(a *marketingAnswers) { a.segment = seg },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Segments.CreateSegment(ctx, "org1", sin)
		},
		seg, "org1", sin)
	add("GetSegment", "GetSegment", func(a *marketingAnswers) { a.segment = seg },
		func(ctx context.Context, c ports.Core) (any, error) { return c.Segments.GetSegment(ctx, "org1", "s1") },
		seg, "org1", "s1")
	add("ListSegments", "ListSegments", func(a *marketingAnswers) { a.segments = []ports.Segment{seg} },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Segments.ListSegments(ctx, "org1", 9, 3)
		},
		[]ports.Segment{seg}, "org1", 9, 3)
	add("UpdateSegment", "UpdateSegment", func(a *marketingAnswers) { a.segment = seg },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Segments.UpdateSegment(ctx, "org1", "s1", ports.SegmentInput{Description: sp("x")})
		}, seg, "org1", "s1", ports.SegmentInput{Description: sp("x")})
	add("DeleteSegment", "DeleteSegment", func(*marketingAnswers) {},
		func(ctx context.Context, c ports.Core) (any, error) {
			return nil, c.Segments.DeleteSegment(ctx, "org1", "s1")
		},
		nil, "org1", "s1")
	preview := ports.SegmentPreview{Count: 7, Sample: []ports.Contact{contact}}
	add("PreviewRule", "PreviewRule", func(a *marketingAnswers) { a.preview = preview },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Segments.PreviewRule(ctx, "org1", rule, 25)
		},
		preview, "org1", rule, 25)
	add("PreviewSegment", "PreviewSegment", func(a *marketingAnswers) { a.preview = preview },
		func(ctx context.Context, c ports.Core) (any, error) {
			return c.Segments.PreviewSegment(ctx, "org1", "s1", 5)
		},
		preview, "org1", "s1", 5)
	return trips
}
