module github.com/postmill/postmill/analytics

go 1.26
