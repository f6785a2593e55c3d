module github.com/postmill/postmill/analytics

go 1.26

replace github.com/postmill/postmill/ports => ../ports
