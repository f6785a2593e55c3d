module github.com/postmill/postmill/adapters

go 1.26
