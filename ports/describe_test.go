package ports_test

import (
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  *ports.Error
		want string
	}{
		{"message only", ports.NotFound("Message not found"), "Message not found"},
		{"empty message names the code", &ports.Error{Code: ports.CodeFailedPrecondition}, "failed_precondition"},
		{
			"violations with and without a path",
			ports.ValidationError(
				ports.FieldViolation{Path: "from", Message: "exactly one address"},
				ports.FieldViolation{Message: "the message has no body"},
			),
			"Validation failed (from: exactly one address; the message has no body)",
		},
	} {
		if got := c.err.Describe(); got != c.want {
			t.Errorf("%s: Describe = %q, want %q", c.name, got, c.want)
		}
	}
}
