package edge

// The request examples of the broadcast routes, kept beside them and added to requestExamples at start.
func init() {
	requestExamples["create-broadcast"] = []bodyExample{
		{"topic", "HTML to a topic's subscribers, interpolated per contact",
			`{"name":"November newsletter","subject":"News for {{ contact.firstName }}","from":"news@mail.acme.example",` +
				`"replyTo":"support@acme.example","html":"<p>Hello {{ contact.firstName }}, you are on {{ contact.properties.plan }}.</p>",` +
				`"text":"Hello {{ contact.firstName }}","topicId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d18"}`},
		{"template", "A template to a segment",
			`{"name":"Winter sale","subject":"Winter sale","from":"news@mail.acme.example",` +
				`"templateId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d18","segmentId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d19"}`},
	}
	requestExamples["update-broadcast"] = []bodyExample{
		{"subject", "A new subject", `{"subject":"Our November news"}`},
		{"clear", "Clear the audience and the scheduled time", `{"topicId":null,"scheduledAt":null}`},
	}
	requestExamples["schedule-broadcast"] = []bodyExample{{"schedule", "", `{"scheduledAt":"2026-12-01T09:00:00Z"}`}}
}
