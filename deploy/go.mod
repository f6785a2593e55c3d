module github.com/postmill/postmill/deploy

go 1.26
