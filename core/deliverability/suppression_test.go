package deliverability

import (
	"reflect"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestNewSuppression(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	type want struct {
		address, scope, reason string
	}
	tests := []struct {
		name  string
		org   string
		req   ports.NewSuppression
		want  want
		wantV []ports.FieldViolation
	}{
		{"defaults", "org", ports.NewSuppression{Address: "  Jane@Example.COM "},
			want{"jane@example.com", ports.SuppressionScopeTenant, ports.SuppressionManual}, nil},
		{"tenant bare domain", "org", ports.NewSuppression{Address: "Example.com", Reason: "complaint"},
			want{"example.com", ports.SuppressionScopeTenant, ports.SuppressionComplaint}, nil},
		{"domain scope with a bare domain", "org", ports.NewSuppression{Address: "example.com", Scope: "domain", Reason: "invalid"},
			want{"example.com", ports.SuppressionScopeDomain, ports.SuppressionInvalid}, nil},
		{"recipient scope with an address", "org", ports.NewSuppression{Address: "a@example.com", Scope: "recipient", Reason: "bounce"},
			want{"a@example.com", ports.SuppressionScopeRecipient, ports.SuppressionBounce}, nil},
		{"global row", "", ports.NewSuppression{Address: "spamtrap.example", Scope: "global"},
			want{"spamtrap.example", ports.SuppressionScopeGlobal, ports.SuppressionManual}, nil},
		{"domain scope with an address", "org", ports.NewSuppression{Address: "a@example.com", Scope: "domain"}, want{},
			[]ports.FieldViolation{{Path: "address", Message: msgBareDomainScope}}},
		{"recipient scope with a bare domain", "org", ports.NewSuppression{Address: "example.com", Scope: "recipient"}, want{},
			[]ports.FieldViolation{{Path: "address", Message: msgAddressScope}}},
		{"invalid address under domain scope reports the form", "org", ports.NewSuppression{Address: "exa mple", Scope: "domain"}, want{},
			[]ports.FieldViolation{{Path: "address", Message: msgAddressForm}}},
		{"blank address", "org", ports.NewSuppression{Address: "   "}, want{},
			[]ports.FieldViolation{{Path: "address", Message: msgAddressRequired}}},
		{"unknown scope", "org", ports.NewSuppression{Address: "a@example.com", Scope: "Tenant"}, want{},
			[]ports.FieldViolation{{Path: "scope", Message: msgScope}}},
		{"unknown reason", "org", ports.NewSuppression{Address: "a@example.com", Reason: "spam"}, want{},
			[]ports.FieldViolation{{Path: "reason", Message: msgReason}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := newSuppression(tt.org, tt.req, now)
			if tt.wantV != nil {
				e := wantCode(t, err, ports.CodeInvalidArgument)
				if e.Message != ports.MessageValidationFailed || !reflect.DeepEqual(e.Details, tt.wantV) {
					t.Errorf("error %q %+v, want %+v", e.Message, e.Details, tt.wantV)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Address != tt.want.address || got.Scope != tt.want.scope || got.Reason != tt.want.reason {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.OrganizationID != tt.org || !got.CreatedAt.Equal(now) {
				t.Errorf("organization %q created %v, want %q %v", got.OrganizationID, got.CreatedAt, tt.org, now)
			}
			mustUUIDv7(t, got.ID)
		})
	}
}

func TestGlobalSuppressionForcesScope(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, scope := range []string{"", "tenant", "domain", "recipient", "global"} {
		got, err := globalSuppression(ports.NewSuppression{Address: "Trap@Example.com", Scope: scope, Reason: "invalid"}, now)
		if err != nil {
			t.Fatalf("scope %q: %v", scope, err)
		}
		if got.Scope != ports.SuppressionScopeGlobal || got.OrganizationID != "" || got.Address != "trap@example.com" ||
			got.Reason != ports.SuppressionInvalid {
			t.Errorf("scope %q: got %+v, want a global row without organization", scope, got)
		}
	}
	if _, err := globalSuppression(ports.NewSuppression{Address: "x"}, now); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Errorf("invalid address: error %v, want invalid_argument", err)
	}
}
