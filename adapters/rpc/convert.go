package rpc

import (
	"bytes"
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
)

// Conversions between ports values and their wire messages, the helpers every area shares; each area's
// own conversions sit in its file beside its server and client. Each pair is exact inverses on
// everything the wire carries: a zero time.Time travels as an unset Timestamp, a nil *time.Time
// likewise, nil slices and maps as unset list and map wrappers, and nil []byte as an unset optional
// field, so nil, empty and set all come back as they left. Go ints travel as int64.

func timeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timeFromProto(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func timePtrToProto(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func timePtrFromProto(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func durationToProto(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func durationFromProto(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// cloneStrings copies a wire list into a slice that is non-nil even when empty: the caller has already
// decided, from the wrapper's presence, that the value is not nil.
func cloneStrings(in []string) []string {
	return append(make([]string, 0, len(in)), in...)
}

func stringListToProto(values []string) *emailv1.StringList {
	if values == nil {
		return nil
	}
	return &emailv1.StringList{Values: values}
}

func stringListFromProto(l *emailv1.StringList) []string {
	if l == nil {
		return nil
	}
	return cloneStrings(l.GetValues())
}

func stringMapToProto(m map[string]string) *emailv1.StringMap {
	if m == nil {
		return nil
	}
	return &emailv1.StringMap{Values: m}
}

func stringMapFromProto(m *emailv1.StringMap) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m.GetValues()))
	for k, v := range m.GetValues() {
		out[k] = v
	}
	return out
}

// jsonObjectToProto encodes a JSON object held as a Go map; nil stays nil so that the receiver can tell
// it from an empty object.
func jsonObjectToProto(m map[string]any) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	return json.Marshal(m)
}

// jsonObjectFromProto decodes what jsonObjectToProto encoded. UseNumber keeps every number exact, as
// json.Number: a float64 would round integers beyond 2^53.
func jsonObjectFromProto(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		// "null" is not what jsonObjectToProto sends for a non-nil map; keep the promise of non-nil.
		m = map[string]any{}
	}
	return m, nil
}

// mapItems converts each element of a list between its ports and proto forms, in order. The list wrappers
// around it keep nil apart from empty; an empty in gives an empty (not nil) out.
func mapItems[T, U any](in []T, convert func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, convert(v))
	}
	return out
}
