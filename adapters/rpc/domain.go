package rpc

import (
	"github.com/postmill/postmill/ports"

	domainv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/domain/v1"
)

// Domain.DKIMPrivateKey has no field in the domain schema and is dropped on the way out; the delivery
// schema carries it, because the MTA signs.

func dnsRecordToProto(r ports.DNSRecord) *domainv1.DNSRecord {
	return &domainv1.DNSRecord{
		Id:        r.ID,
		DomainId:  r.DomainID,
		Type:      r.Type,
		Host:      r.Host,
		Value:     r.Value,
		Ttl:       int64(r.TTL),
		Required:  r.Required,
		Verified:  r.Verified,
		CheckedAt: timePtrToProto(r.CheckedAt),
	}
}

func dnsRecordFromProto(r *domainv1.DNSRecord) ports.DNSRecord {
	return ports.DNSRecord{
		ID:        r.GetId(),
		DomainID:  r.GetDomainId(),
		Type:      r.GetType(),
		Host:      r.GetHost(),
		Value:     r.GetValue(),
		TTL:       int(r.GetTtl()),
		Required:  r.GetRequired(),
		Verified:  r.GetVerified(),
		CheckedAt: timePtrFromProto(r.GetCheckedAt()),
	}
}

func dnsRecordsToProto(records []ports.DNSRecord) *domainv1.DNSRecordList {
	if records == nil {
		return nil
	}
	return &domainv1.DNSRecordList{Items: mapItems(records, dnsRecordToProto)}
}

func dnsRecordsFromProto(l *domainv1.DNSRecordList) []ports.DNSRecord {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), dnsRecordFromProto)
}

// domainToProto leaves DKIMPrivateKey behind: the schema has no field for it.
func domainToProto(d ports.Domain) *domainv1.Domain {
	return &domainv1.Domain{
		Id:             d.ID,
		OrganizationId: d.OrganizationID,
		Name:           d.Name,
		Status:         string(d.Status),
		Region:         d.Region,
		DkimSelector:   d.DKIMSelector,
		DkimPublicKey:  d.DKIMPublicKey,
		VerifiedAt:     timePtrToProto(d.VerifiedAt),
		CreatedAt:      timeToProto(d.CreatedAt),
		Records:        dnsRecordsToProto(d.Records),
		OpenTracking:   d.OpenTracking,
		ClickTracking:  d.ClickTracking,
	}
}

func domainFromProto(d *domainv1.Domain) ports.Domain {
	return ports.Domain{
		ID:             d.GetId(),
		OrganizationID: d.GetOrganizationId(),
		Name:           d.GetName(),
		Status:         ports.DomainStatus(d.GetStatus()),
		Region:         d.GetRegion(),
		DKIMSelector:   d.GetDkimSelector(),
		DKIMPublicKey:  d.GetDkimPublicKey(),
		VerifiedAt:     timePtrFromProto(d.GetVerifiedAt()),
		CreatedAt:      timeFromProto(d.GetCreatedAt()),
		Records:        dnsRecordsFromProto(d.GetRecords()),
		OpenTracking:   d.GetOpenTracking(),
		ClickTracking:  d.GetClickTracking(),
	}
}

// boolPtrCopy copies an optional bool, so that a ports value never points into a wire message or the
// other way round.
func boolPtrCopy(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// trackingSettingsToProto keeps each setting's presence: unset means "leave as it is", false "turn off".
func trackingSettingsToProto(t ports.TrackingSettings) *domainv1.TrackingSettings {
	return &domainv1.TrackingSettings{OpenTracking: boolPtrCopy(t.OpenTracking), ClickTracking: boolPtrCopy(t.ClickTracking)}
}

func trackingSettingsFromProto(t *domainv1.TrackingSettings) ports.TrackingSettings {
	if t == nil {
		return ports.TrackingSettings{}
	}
	return ports.TrackingSettings{OpenTracking: boolPtrCopy(t.OpenTracking), ClickTracking: boolPtrCopy(t.ClickTracking)}
}

func domainsToProto(domains []ports.Domain) *domainv1.DomainList {
	if domains == nil {
		return nil
	}
	return &domainv1.DomainList{Items: mapItems(domains, domainToProto)}
}

func domainsFromProto(l *domainv1.DomainList) []ports.Domain {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), domainFromProto)
}
