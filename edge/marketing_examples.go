package edge

// The request examples of the contact, topic and segment routes, kept beside them and added to
// requestExamples at start.
func init() {
	requestExamples["create-contact"] = []bodyExample{
		{"contact", "A contact with properties",
			`{"email":"ada@example.com","firstName":"Ada","lastName":"Lovelace","locale":"en-GB","timezone":"Europe/London",` +
				`"source":"signup-form","properties":{"plan":"pro","seats":12,"beta":true},"consentSource":"signup form","consentIp":"192.0.2.10"}`},
	}
	requestExamples["update-contact"] = []bodyExample{
		{"unsubscribe", "Record that the contact withdrew consent", `{"consentStatus":"unsubscribed","consentSource":"support ticket"}`},
	}
	requestExamples["import-contacts"] = []bodyExample{
		{"csv", "A CSV document", `{"csv":"email,first_name,plan\nada@example.com,Ada,pro\ngrace@example.org,Grace,free\n"}`},
		{"contacts", "Contacts as JSON, without updating existing ones",
			`{"contacts":[{"email":"ada@example.com","firstName":"Ada"},{"email":"grace@example.org","properties":{"plan":"free"}}],"upsert":false}`},
	}
	requestExamples["update-contact-preferences"] = []bodyExample{
		{"topics", "Join one topic, leave another", `{"topics":[{"key":"product-news","subscribed":true},{"key":"offers","subscribed":false}]}`},
	}
	requestExamples["create-topic"] = []bodyExample{
		{"topic", "A double opt-in topic", `{"key":"product-news","name":"Product news","description":"New features, once a month","doubleOptIn":true}`},
		{"mailed", "A double opt-in topic whose confirmation links Postmill mails",
			`{"key":"product-news","name":"Product news","doubleOptIn":true,"confirmFrom":"Acme News <news@acme.example>"}`},
	}
	requestExamples["update-topic"] = []bodyExample{{"rename", "", `{"name":"Product updates"}`}}
	requestExamples["subscribe-topic"] = []bodyExample{
		{"email", "By email, creating the contact", `{"email":"ada@example.com","consentSource":"footer form","consentIp":"192.0.2.10"}`},
		{"contact", "By contact id", `{"contactId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d17"}`},
	}
	requestExamples["unsubscribe-topic"] = []bodyExample{{"contact", "", `{"contactId":"0196f3c2-8a41-7d3e-9c55-2f1b6a0e4d17"}`}}
	requestExamples["create-segment"] = []bodyExample{
		{"segment", "Active pro customers on the news topic",
			`{"name":"Active pro","rule":{"op":"and","rules":[{"field":"properties.plan","cmp":"eq","value":"pro"},` +
				`{"field":"lastActiveAt","cmp":"gte","value":{"daysAgo":30}},{"field":"topic.product-news","cmp":"eq"}]}}`},
	}
	requestExamples["update-segment"] = []bodyExample{
		{"rule", "A new rule", `{"rule":{"field":"properties.seats","cmp":"gt","value":10}}`},
	}
	requestExamples["preview-segment-rule"] = []bodyExample{
		{"rule", "", `{"rule":{"op":"or","rules":[{"field":"email","cmp":"contains","value":"@example.com"},{"field":"bounced","cmp":"eq","value":true}]}}`},
	}
}
