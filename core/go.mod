module github.com/postmill/postmill/core

go 1.26.0

require (
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/google/uuid v1.6.0
	github.com/postmill/postmill/ports v0.0.0
	github.com/pquerna/otp v1.5.0
	golang.org/x/crypto v0.58.0
	golang.org/x/net v0.61.0
)

require (
	github.com/boombuler/barcode v1.0.1-0.20190219062509-6c824513bacc // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/postmill/postmill/ports => ../ports
