package ports_test

import (
	"errors"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestCheckOffsetPage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit, offset int
		want          int
		paths         []string
	}{
		{0, 0, ports.DefaultListLimit, nil},
		{1, 0, 1, nil},
		{100, 5000, 100, nil},
		{101, 0, 0, []string{"limit"}},
		{-1, 0, 0, []string{"limit"}},
		{25, -1, 0, []string{"offset"}},
		{101, -1, 0, []string{"limit", "offset"}},
	}
	for _, tc := range tests {
		got, err := ports.CheckOffsetPage(tc.limit, tc.offset)
		if tc.paths == nil {
			if err != nil || got != tc.want {
				t.Errorf("CheckOffsetPage(%d, %d) = %d, %v; want %d", tc.limit, tc.offset, got, err, tc.want)
			}
			continue
		}
		var pe *ports.Error
		if !errors.As(err, &pe) || pe.Code != ports.CodeInvalidArgument || len(pe.Details) != len(tc.paths) {
			t.Errorf("CheckOffsetPage(%d, %d) error = %v; want invalid_argument at %v", tc.limit, tc.offset, err, tc.paths)
			continue
		}
		for i, p := range tc.paths {
			if pe.Details[i].Path != p {
				t.Errorf("CheckOffsetPage(%d, %d) detail %d at %q; want %q", tc.limit, tc.offset, i, pe.Details[i].Path, p)
			}
		}
	}
}
