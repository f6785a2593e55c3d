module github.com/postmill/postmill/core

go 1.26
