module github.com/postmill/postmill/inbound

go 1.26

replace github.com/postmill/postmill/ports => ../ports
