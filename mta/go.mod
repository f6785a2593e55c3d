module github.com/postmill/postmill/mta

go 1.26
