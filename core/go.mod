module github.com/postmill/postmill/core

go 1.26.0

require github.com/postmill/postmill/ports v0.0.0

require (
	github.com/boombuler/barcode v1.0.1-0.20190219062509-6c824513bacc // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/pquerna/otp v1.5.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
)

replace github.com/postmill/postmill/ports => ../ports
