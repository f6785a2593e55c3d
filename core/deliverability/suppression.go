package deliverability

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/ports"
)

// Limits of the bounce and complaint lists: the paging of every list (ports.DefaultListLimit and
// ports.MaxListLimit), under the names this package has always exported.
const (
	// DefaultPageLimit is the page size when the caller gives none.
	DefaultPageLimit = ports.DefaultListLimit
	// MaxPageLimit bounds one page.
	MaxPageLimit = ports.MaxListLimit
)

// msgGlobalByAdmins is the permission_denied message of a tenant asking for a global suppression.
const msgGlobalByAdmins = "global suppressions are managed by platform admins"

// Violation messages of the enumerated fields; they list the accepted values.
const (
	msgScope  = "must be one of global, tenant, domain, recipient"
	msgReason = "must be one of bounce, complaint, invalid, manual"
)

// msgLimit is the violation message of a page limit out of range.
var msgLimit = fmt.Sprintf("must be between 1 and %d", ports.MaxListLimit)

// ListSuppressions implements ports.DeliverabilityService: the organization's own rows, never global ones,
// the newest ports.MaxUnpagedListRows.
func (s *Service) ListSuppressions(ctx context.Context, orgID string) ([]ports.Suppression, error) {
	if orgID == "" {
		return nil, errNoOrganization
	}
	page, err := s.store.ListSuppressions(ctx, orgID, ports.Unpaged())
	return page.Data, err
}

// ListSuppressionsPage implements ports.DeliverabilityService: the organization's own rows a page at a
// time. An organization id is required: the store reads "" as the global list.
func (s *Service) ListSuppressionsPage(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Suppression], error) {
	if orgID == "" {
		return ports.Page[ports.Suppression]{}, errNoOrganization
	}
	q, err := q.Checked()
	if err != nil {
		return ports.Page[ports.Suppression]{}, err
	}
	return s.store.ListSuppressions(ctx, orgID, q)
}

// CreateSuppression implements ports.DeliverabilityService. Scope global is refused before anything else is
// looked at: the request is not the tenant's to make, however well formed.
func (s *Service) CreateSuppression(ctx context.Context, orgID string, req ports.NewSuppression) (ports.Suppression, error) {
	if orgID == "" {
		return ports.Suppression{}, errNoOrganization
	}
	if req.Scope == ports.SuppressionScopeGlobal {
		return ports.Suppression{}, ports.Errorf(ports.CodePermissionDenied, msgGlobalByAdmins)
	}
	sup, err := newSuppression(orgID, req, s.now())
	if err != nil {
		return ports.Suppression{}, err
	}
	return s.store.InsertSuppression(ctx, sup)
}

// DeleteSuppression implements ports.DeliverabilityService. An id that is not a UUID names no suppression,
// so the store is not asked.
func (s *Service) DeleteSuppression(ctx context.Context, orgID, id string) (bool, error) {
	if orgID == "" {
		return false, errNoOrganization
	}
	if uuid.Validate(id) != nil {
		return false, nil
	}
	return s.store.DeleteSuppression(ctx, orgID, id)
}

// ListGlobalSuppressions implements ports.DeliverabilityService for the admin routes: the newest
// ports.MaxUnpagedListRows platform-wide rows.
func (s *Service) ListGlobalSuppressions(ctx context.Context) ([]ports.Suppression, error) {
	page, err := s.store.ListSuppressions(ctx, "", ports.Unpaged())
	return page.Data, err
}

// CreateGlobalSuppression implements ports.DeliverabilityService for the admin routes. Whatever scope the
// request names, the row is global and belongs to no organization: the admin route exists to make exactly
// that, and a tenant-scoped row without a tenant would mean nothing.
func (s *Service) CreateGlobalSuppression(ctx context.Context, req ports.NewSuppression) (ports.Suppression, error) {
	sup, err := globalSuppression(req, s.now())
	if err != nil {
		return ports.Suppression{}, err
	}
	return s.store.InsertSuppression(ctx, sup)
}

// DeleteGlobalSuppression implements ports.DeliverabilityService for the admin routes.
func (s *Service) DeleteGlobalSuppression(ctx context.Context, id string) (bool, error) {
	if uuid.Validate(id) != nil {
		return false, nil
	}
	return s.store.DeleteSuppression(ctx, "", id)
}

// ListBounces implements ports.DeliverabilityService.
func (s *Service) ListBounces(ctx context.Context, orgID string, q ports.PageQuery) (ports.BouncePage, error) {
	if orgID == "" {
		return ports.BouncePage{}, errNoOrganization
	}
	q, err := pageQuery(q)
	if err != nil {
		return ports.BouncePage{}, err
	}
	page, err := s.store.ListBounces(ctx, orgID, q)
	classifyRecorded(page.Data)
	return page, err
}

// ListComplaints implements ports.DeliverabilityService.
func (s *Service) ListComplaints(ctx context.Context, orgID string, q ports.PageQuery) (ports.ComplaintPage, error) {
	if orgID == "" {
		return ports.ComplaintPage{}, errNoOrganization
	}
	q, err := pageQuery(q)
	if err != nil {
		return ports.ComplaintPage{}, err
	}
	return s.store.ListComplaints(ctx, orgID, q)
}

// pageQuery applies the default limit and checks its range; the cursor is the store's to judge.
func pageQuery(q ports.PageQuery) (ports.PageQuery, error) {
	if q.Limit == 0 {
		q.Limit = ports.DefaultListLimit
	}
	if q.Limit < 1 || q.Limit > ports.MaxListLimit {
		return q, ports.ValidationError(ports.FieldViolation{Path: "limit", Message: msgLimit})
	}
	return q, nil
}

// globalSuppression is newSuppression for the admin routes: scope global and no organization, whatever the
// request said.
func globalSuppression(req ports.NewSuppression, now time.Time) (ports.Suppression, error) {
	req.Scope = ports.SuppressionScopeGlobal
	return newSuppression("", req, now)
}

// newSuppression checks and normalises a create request into the row to insert (orgID "" for a global
// one): address trimmed and lower-cased, scope defaulting to tenant and reason to manual, and the address
// form the scope requires. Every violation is reported, not only the first.
func newSuppression(orgID string, req ports.NewSuppression, now time.Time) (ports.Suppression, error) {
	sup := ports.Suppression{
		ID:             newID(),
		OrganizationID: orgID,
		Address:        normaliseAddress(req.Address),
		Scope:          req.Scope,
		Reason:         req.Reason,
		CreatedAt:      now,
	}
	if sup.Scope == "" {
		sup.Scope = ports.SuppressionScopeTenant
	}
	if sup.Reason == "" {
		sup.Reason = ports.SuppressionManual
	}
	if v := checkSuppression(sup); len(v) > 0 {
		return ports.Suppression{}, ports.ValidationError(v...)
	}
	return sup, nil
}

// checkSuppression returns the violations of a normalised suppression (defaults applied), in the order of
// the body's fields.
func checkSuppression(sup ports.Suppression) []ports.FieldViolation {
	var v []ports.FieldViolation
	addrMsg := checkSuppressionAddress(sup.Address)
	scopeOK := true
	switch sup.Scope {
	case ports.SuppressionScopeGlobal, ports.SuppressionScopeTenant:
	case ports.SuppressionScopeDomain:
		if addrMsg == "" && !isBareDomain(sup.Address) {
			addrMsg = msgBareDomainScope
		}
	case ports.SuppressionScopeRecipient:
		if addrMsg == "" && isBareDomain(sup.Address) {
			addrMsg = msgAddressScope
		}
	default:
		scopeOK = false
	}
	if addrMsg != "" {
		v = append(v, ports.FieldViolation{Path: "address", Message: addrMsg})
	}
	if !scopeOK {
		v = append(v, ports.FieldViolation{Path: "scope", Message: msgScope})
	}
	switch sup.Reason {
	case ports.SuppressionBounce, ports.SuppressionComplaint, ports.SuppressionInvalid, ports.SuppressionManual:
	default:
		v = append(v, ports.FieldViolation{Path: "reason", Message: msgReason})
	}
	return v
}

// isBareDomain reports whether a valid suppression address names a whole domain.
func isBareDomain(a string) bool { return !strings.Contains(a, "@") }
