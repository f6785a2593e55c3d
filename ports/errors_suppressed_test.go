package ports_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/postmill/postmill/ports"
)

// TestRecipientSuppressed: the refusal carries SPEC §7's message and code, and is recognised as it is,
// wrapped, and rebuilt from its code and message (as Connect carries it), but not from another refusal.
func TestRecipientSuppressed(t *testing.T) {
	err := ports.RecipientSuppressed("ada@example.com")
	if ports.ErrorCode(err) != ports.CodeInvalidArgument || ports.ErrorMessage(err) != "recipient suppressed: ada@example.com" {
		t.Fatalf("got %v", err)
	}
	rebuilt := &ports.Error{Code: ports.CodeInvalidArgument, Message: ports.ErrorMessage(err)}
	for _, e := range []error{err, fmt.Errorf("send: %w", err), rebuilt} {
		if !ports.IsRecipientSuppressed(e) {
			t.Errorf("%v is not recognised", e)
		}
	}
	for _, e := range []error{
		ports.Errorf(ports.CodeNotFound, "recipient suppressed: ada@example.com"),
		ports.Errorf(ports.CodeInvalidArgument, "recipient suppression list unavailable"),
		ports.ValidationError(ports.FieldViolation{Path: "to", Message: "recipient suppressed"}),
		errors.New("recipient suppressed: ada@example.com"), nil,
	} {
		if ports.IsRecipientSuppressed(e) {
			t.Errorf("%v is taken for a suppressed recipient", e)
		}
	}
}
