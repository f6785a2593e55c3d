module github.com/postmill/postmill/deploy

go 1.26.0

require (
	github.com/postmill/postmill/adapters v0.0.0
	github.com/postmill/postmill/analytics v0.0.0
	github.com/postmill/postmill/core v0.0.0
	github.com/postmill/postmill/edge v0.0.0
	github.com/postmill/postmill/inbound v0.0.0
	github.com/postmill/postmill/mta v0.0.0
	github.com/postmill/postmill/ports v0.0.0
)

require (
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grafana/dskit v0.0.0-20260703122047-de1ec7541c44 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.30.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.47.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.opentelemetry.io/proto/otlp v1.11.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/grpc v1.83.2 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/postmill/postmill/ports => ../ports

replace github.com/postmill/postmill/core => ../core

replace github.com/postmill/postmill/adapters => ../adapters

replace github.com/postmill/postmill/edge => ../edge

replace github.com/postmill/postmill/mta => ../mta

replace github.com/postmill/postmill/inbound => ../inbound

replace github.com/postmill/postmill/analytics => ../analytics
