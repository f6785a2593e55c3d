module github.com/postmill/postmill/inbound

go 1.26
