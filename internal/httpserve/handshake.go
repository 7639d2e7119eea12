package httpserve

import (
	"bytes"
	"io"
	"log"
)

// The reasons ErrorLog tells a failed TLS handshake by.
const (
	// HandshakeCertificateRefused: the client refused the server's
	// certificate (a CA it does not trust, a name the certificate does
	// not hold, expired), and said so in its alert.
	HandshakeCertificateRefused = "certificate_refused"
	// HandshakeNotTLS: what came was not TLS (plain HTTP on the TLS
	// port, say).
	HandshakeNotTLS = "not_tls"
	// HandshakeOther: anything else (the connection closed or reset in
	// the middle, a timeout, no protocol version or cipher suite in
	// common).
	HandshakeOther = "other"
)

// ErrorLog returns the logger of a server's own errors (New's errLog)
// that writes each line to w, and first tells failed of each TLS
// handshake that failed, by its reason (HandshakeCertificateRefused,
// HandshakeNotTLS, HandshakeOther). net/http reports a failed handshake
// only as such a line ("http: TLS handshake error from ADDR: ERROR").
func ErrorLog(w io.Writer, failed func(reason string)) *log.Logger {
	return log.New(handshakeWriter{w: w, failed: failed}, "", 0)
}

type handshakeWriter struct {
	w      io.Writer
	failed func(reason string)
}

// The line net/http writes for a failed handshake, and the words of the
// errors crypto/tls gives for what ErrorLog tells apart: the alerts a
// client sends when it refuses a certificate (Go's clients send "bad
// certificate" whatever the cause; OpenSSL's, curl's, name it over TLS
// 1.2, and over TLS 1.3 send it under keys the server reads as "bad
// record MAC", the one way a handshake gets that error short of a
// network that alters bytes), and a first record that is not a
// handshake's.
var (
	handshakeLine = []byte("http: TLS handshake error from ")
	refusedAlerts = [][]byte{
		[]byte("remote error: tls: bad certificate"),
		[]byte("remote error: tls: unknown certificate authority"),
		[]byte("remote error: tls: unknown certificate"),
		[]byte("remote error: tls: expired certificate"),
		[]byte("remote error: tls: unsupported certificate"),
		[]byte("remote error: tls: revoked certificate"),
		[]byte("remote error: tls: access denied"),
		[]byte("local error: tls: bad record MAC"),
	}
	notTLS = [][]byte{
		[]byte("first record does not look like a TLS handshake"),
		[]byte("client sent an HTTP request to an HTTPS server"),
	}
)

func (h handshakeWriter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, handshakeLine) {
		h.failed(handshakeReason(p))
	}
	return h.w.Write(p)
}

// handshakeReason tells the failed handshake of line by its reason.
func handshakeReason(line []byte) string {
	for _, a := range refusedAlerts {
		if bytes.Contains(line, a) {
			return HandshakeCertificateRefused
		}
	}
	for _, n := range notTLS {
		if bytes.Contains(line, n) {
			return HandshakeNotTLS
		}
	}
	return HandshakeOther
}
