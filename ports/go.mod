module github.com/postmill/postmill/ports

go 1.26
