package sharedstore

// The endpoint's TLS is checked against the CAs in force (Config.RootCAs),
// which may change while the store is used: origin_ca_file's files read
// again.

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync/atomic"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// clientTrusting is the SDK's HTTP client trusting the CAs of pool (nil:
// the system roots), in a copy of it: a CA bundle the SDK is given
// (AWS_CA_BUNDLE) is added to its client's pool, and in serve pool is
// the origin client's too, which must not trust the store's bundle.
func clientTrusting(pool *x509.CertPool) *awshttp.BuildableClient {
	if pool != nil {
		pool = pool.Clone()
	}
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = pool
	})
}

// followingClient makes each request with the SDK's client trusting the
// CAs in force (Config.RootCAs): a connection from a change on is
// verified against the new CAs. The connections the client before
// verified are used no more, and close once idle for the SDK transport's
// idle timeout (90 seconds).
type followingClient struct {
	cur atomic.Pointer[awshttp.BuildableClient]
}

func (c *followingClient) Do(req *http.Request) (*http.Response, error) {
	return c.cur.Load().Do(req)
}

// trust has the requests from now on made trusting the CAs of pool.
func (c *followingClient) trust(pool *x509.CertPool) {
	c.cur.Store(clientTrusting(pool))
}
