module github.com/postmill/postmill/edge

go 1.26.0

require github.com/postmill/postmill/ports v0.0.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/danielgtaylor/huma/v2 v2.37.2 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
)

replace github.com/postmill/postmill/ports => ../ports
