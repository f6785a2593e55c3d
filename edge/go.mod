module github.com/postmill/postmill/edge

go 1.26
