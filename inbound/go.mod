module github.com/postmill/postmill/inbound

go 1.26.0

replace github.com/postmill/postmill/ports => ../ports

replace github.com/postmill/postmill/adapters => ../adapters

require (
	github.com/emersion/go-message v0.18.2
	github.com/emersion/go-smtp v0.25.1
	github.com/postmill/postmill/adapters v0.0.0
	github.com/postmill/postmill/ports v0.0.0
)

require (
	github.com/emersion/go-sasl v0.0.0-20241020182733-b788ff22d5a6 // indirect
	golang.org/x/text v0.43.0 // indirect
)
