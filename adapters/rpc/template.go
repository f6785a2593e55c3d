package rpc

import (
	"github.com/postmill/postmill/ports"

	templatev1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/template/v1"
)

// CurrentVersion travels as an optional field, so a template never published (nil) and one whose
// pointer is set come back as they left; Versions, filled only by GetTemplate, travels as an unset list
// wrapper when nil.

func intPtrToProto(n *int) *int64 {
	if n == nil {
		return nil
	}
	v := int64(*n)
	return &v
}

func intPtrFromProto(n *int64) *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}

func templateVersionToProto(v ports.TemplateVersion) *templatev1.TemplateVersion {
	return &templatev1.TemplateVersion{
		Id:          v.ID,
		TemplateId:  v.TemplateID,
		Version:     int64(v.Version),
		Subject:     v.Subject,
		Html:        v.HTML,
		Text:        v.Text,
		ReactSource: v.ReactSource,
		CreatedAt:   timeToProto(v.CreatedAt),
	}
}

func templateVersionFromProto(v *templatev1.TemplateVersion) ports.TemplateVersion {
	return ports.TemplateVersion{
		ID:          v.GetId(),
		TemplateID:  v.GetTemplateId(),
		Version:     int(v.GetVersion()),
		Subject:     v.GetSubject(),
		HTML:        v.GetHtml(),
		Text:        v.GetText(),
		ReactSource: v.GetReactSource(),
		CreatedAt:   timeFromProto(v.GetCreatedAt()),
	}
}

func templateVersionsToProto(versions []ports.TemplateVersion) *templatev1.TemplateVersionList {
	if versions == nil {
		return nil
	}
	return &templatev1.TemplateVersionList{Items: mapItems(versions, templateVersionToProto)}
}

func templateVersionsFromProto(l *templatev1.TemplateVersionList) []ports.TemplateVersion {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), templateVersionFromProto)
}

func templateToProto(t ports.Template) *templatev1.Template {
	return &templatev1.Template{
		Id:             t.ID,
		OrganizationId: t.OrganizationID,
		Name:           t.Name,
		CurrentVersion: intPtrToProto(t.CurrentVersion),
		CreatedAt:      timeToProto(t.CreatedAt),
		UpdatedAt:      timeToProto(t.UpdatedAt),
		Versions:       templateVersionsToProto(t.Versions),
	}
}

func templateFromProto(t *templatev1.Template) ports.Template {
	return ports.Template{
		ID:             t.GetId(),
		OrganizationID: t.GetOrganizationId(),
		Name:           t.GetName(),
		CurrentVersion: intPtrFromProto(t.CurrentVersion),
		CreatedAt:      timeFromProto(t.GetCreatedAt()),
		UpdatedAt:      timeFromProto(t.GetUpdatedAt()),
		Versions:       templateVersionsFromProto(t.GetVersions()),
	}
}

func templatesToProto(templates []ports.Template) *templatev1.TemplateList {
	if templates == nil {
		return nil
	}
	return &templatev1.TemplateList{Items: mapItems(templates, templateToProto)}
}

func templatesFromProto(l *templatev1.TemplateList) []ports.Template {
	if l == nil {
		return nil
	}
	return mapItems(l.GetItems(), templateFromProto)
}

func newTemplateVersionToProto(v ports.NewTemplateVersion) *templatev1.NewTemplateVersion {
	return &templatev1.NewTemplateVersion{Subject: v.Subject, Html: v.HTML, Text: v.Text, ReactSource: v.ReactSource}
}

func newTemplateVersionFromProto(v *templatev1.NewTemplateVersion) ports.NewTemplateVersion {
	return ports.NewTemplateVersion{Subject: v.GetSubject(), HTML: v.GetHtml(), Text: v.GetText(), ReactSource: v.GetReactSource()}
}

func renderedTemplateToProto(r ports.RenderedTemplate) *templatev1.RenderedTemplate {
	return &templatev1.RenderedTemplate{Subject: r.Subject, Html: r.HTML, Text: r.Text}
}

func renderedTemplateFromProto(r *templatev1.RenderedTemplate) ports.RenderedTemplate {
	return ports.RenderedTemplate{Subject: r.GetSubject(), HTML: r.GetHtml(), Text: r.GetText()}
}
