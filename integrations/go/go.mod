module github.com/etcd-join-broker/etcd-join-broker/integrations/go

go 1.24.0

require github.com/go-jose/go-jose/v4 v4.1.9
