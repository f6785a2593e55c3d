module github.com/postmill/postmill/analytics

go 1.26

require github.com/postmill/postmill/ports v0.0.0

replace github.com/postmill/postmill/ports => ../ports
