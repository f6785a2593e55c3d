package rpc

import (
	"github.com/postmill/postmill/ports"

	webhookv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/webhook/v1"
)

// WebhookEndpoint.Secret, the sealed secret, has no wire field and is dropped on the way out; the plaintext
// travels only as CreatedWebhookEndpoint.PlainSecret. Payload keeps nil and empty apart through its
// optional field.

func eventTypesToProto(types []string) *webhookv1.EventTypeList {
	if types == nil {
		return nil
	}
	return &webhookv1.EventTypeList{Values: types}
}

func eventTypesFromProto(l *webhookv1.EventTypeList) []string {
	if l == nil {
		return nil
	}
	return cloneStrings(l.GetValues())
}

func webhookEndpointToProto(e ports.WebhookEndpoint) *webhookv1.WebhookEndpoint {
	return &webhookv1.WebhookEndpoint{
		Id:             e.ID,
		OrganizationId: e.OrganizationID,
		Url:            e.URL,
		Enabled:        e.Enabled,
		EventTypes:     eventTypesToProto(e.EventTypes),
		CreatedAt:      timeToProto(e.CreatedAt),
	}
}

func webhookEndpointFromProto(e *webhookv1.WebhookEndpoint) ports.WebhookEndpoint {
	return ports.WebhookEndpoint{
		ID:             e.GetId(),
		OrganizationID: e.GetOrganizationId(),
		URL:            e.GetUrl(),
		Enabled:        e.GetEnabled(),
		EventTypes:     eventTypesFromProto(e.GetEventTypes()),
		CreatedAt:      timeFromProto(e.GetCreatedAt()),
	}
}

func webhookEndpointsToProto(endpoints []ports.WebhookEndpoint) *webhookv1.WebhookEndpointList {
	if endpoints == nil {
		return nil
	}
	return &webhookv1.WebhookEndpointList{Items: mapItems(endpoints, webhookEndpointToProto)}
}

func webhookEndpointsFromProto(l *webhookv1.WebhookEndpointList) []ports.WebhookEndpoint {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), webhookEndpointFromProto)
}

func createdWebhookEndpointToProto(e ports.CreatedWebhookEndpoint) *webhookv1.CreatedWebhookEndpoint {
	return &webhookv1.CreatedWebhookEndpoint{
		Endpoint:    webhookEndpointToProto(e.WebhookEndpoint),
		PlainSecret: e.PlainSecret,
	}
}

func createdWebhookEndpointFromProto(e *webhookv1.CreatedWebhookEndpoint) ports.CreatedWebhookEndpoint {
	return ports.CreatedWebhookEndpoint{
		WebhookEndpoint: webhookEndpointFromProto(e.GetEndpoint()),
		PlainSecret:     e.GetPlainSecret(),
	}
}

func webhookDeliveryToProto(d ports.WebhookDelivery) *webhookv1.WebhookDelivery {
	return &webhookv1.WebhookDelivery{
		Id:              d.ID,
		OrganizationId:  d.OrganizationID,
		EndpointId:      d.EndpointID,
		EventId:         d.EventID,
		EventType:       d.EventType,
		Status:          d.Status,
		Attempts:        int64(d.Attempts),
		ResponseCode:    int64(d.ResponseCode),
		NextRetryAt:     timePtrToProto(d.NextRetryAt),
		DeliveredAt:     timePtrToProto(d.DeliveredAt),
		CreatedAt:       timeToProto(d.CreatedAt),
		Payload:         d.Payload,
		OriginalEventId: d.OriginalEventID,
	}
}

func webhookDeliveryFromProto(d *webhookv1.WebhookDelivery) ports.WebhookDelivery {
	return ports.WebhookDelivery{
		ID:              d.GetId(),
		OrganizationID:  d.GetOrganizationId(),
		EndpointID:      d.GetEndpointId(),
		EventID:         d.GetEventId(),
		EventType:       d.GetEventType(),
		Status:          d.GetStatus(),
		Attempts:        int(d.GetAttempts()),
		ResponseCode:    int(d.GetResponseCode()),
		NextRetryAt:     timePtrFromProto(d.GetNextRetryAt()),
		DeliveredAt:     timePtrFromProto(d.GetDeliveredAt()),
		CreatedAt:       timeFromProto(d.GetCreatedAt()),
		Payload:         d.GetPayload(),
		OriginalEventID: d.GetOriginalEventId(),
	}
}

func webhookDeliveriesToProto(deliveries []ports.WebhookDelivery) *webhookv1.WebhookDeliveryList {
	if deliveries == nil {
		return nil
	}
	return &webhookv1.WebhookDeliveryList{Items: mapItems(deliveries, webhookDeliveryToProto)}
}

func webhookDeliveriesFromProto(l *webhookv1.WebhookDeliveryList) []ports.WebhookDelivery {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), webhookDeliveryFromProto)
}
