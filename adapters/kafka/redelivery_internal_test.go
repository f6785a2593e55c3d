package kafka

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRedeliveryState: headers are read when sane; a garbled count is ignored and a not-before time
// further than maxHold ahead is brought back to maxHold, so no header can park a record for days.
func TestRedeliveryState(t *testing.T) {
	t.Parallel()
	now := time.Now()
	rec := func(deliveries, notBefore string) *kgo.Record {
		return &kgo.Record{Headers: []kgo.RecordHeader{{Key: headerDeliveries, Value: []byte(deliveries)},
			{Key: headerNotBefore, Value: []byte(notBefore)}}}
	}
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	cases := []struct {
		name       string
		rec        *kgo.Record
		wantBefore int
		wantDue    time.Time
	}{
		{"first delivery", &kgo.Record{}, 0, time.Time{}},
		{"nacked with a delay", rec("3", ms(now.Add(time.Minute))), 3, time.UnixMilli(now.Add(time.Minute).UnixMilli())},
		{"garbled", rec("-4", "soon"), 0, time.Time{}},
		{"absurd count", rec("99999999999", ""), 0, time.Time{}},
		{"a year ahead", rec("1", ms(now.Add(365*24*time.Hour))), 1, now.Add(maxHold)},
	}
	for _, tc := range cases {
		before, due := redeliveryState(tc.rec, now)
		if before != tc.wantBefore || !due.Equal(tc.wantDue) {
			t.Errorf("%s: (%d, %v), want (%d, %v)", tc.name, before, due, tc.wantBefore, tc.wantDue)
		}
	}
}
