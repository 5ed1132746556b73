package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLS material made at Start for Options.TLS: a throw-away CA and one
// server certificate it signs, valid for 127.0.0.1, ::1 and localhost, so
// that clients verify the masters as they would in production (no
// InsecureSkipVerify anywhere).
type tlsFiles struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

// certValidity is how long the lab's certificates are valid: far longer
// than any test, starting a little in the past so a clock a few minutes
// behind the file's creation does not reject them.
const certValidity = 24 * time.Hour

// makeTLSFiles writes ca.crt, server.crt and server.key (ECDSA P-256) into
// dir.
func makeTLSFiles(dir string) (*tlsFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("lab: TLS: CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "redlock lab test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("lab: TLS: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("lab: TLS: CA certificate: %w", err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("lab: TLS: server key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "redlock lab master"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Client auth too: redis-server uses the same certificate when it
		// connects out (replication), should a test ever need it.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("lab: TLS: server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		return nil, fmt.Errorf("lab: TLS: server key: %w", err)
	}
	f := &tlsFiles{
		caFile:   filepath.Join(dir, "ca.crt"),
		certFile: filepath.Join(dir, "server.crt"),
		keyFile:  filepath.Join(dir, "server.key"),
		pool:     x509.NewCertPool(),
	}
	f.pool.AddCert(ca)
	for _, w := range []struct {
		path, typ string
		der       []byte
	}{{f.caFile, "CERTIFICATE", caDER}, {f.certFile, "CERTIFICATE", srvDER}, {f.keyFile, "PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der}), 0o600); err != nil {
			return nil, fmt.Errorf("lab: TLS: %w", err)
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // crypto/rand does not fail
	return n.Add(n, big.NewInt(1))
}

// clientConfig is a client TLS configuration that trusts only the lab's CA.
// ServerName is left empty: go-redis and crypto/tls take it from the
// address dialled (127.0.0.1, in the certificate).
func (f *tlsFiles) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: f.pool, MinVersion: tls.VersionTLS12}
}

// serverArgs are the redis-server flags that make it listen with TLS only
// on port, and not ask clients for certificates.
func (f *tlsFiles) serverArgs(port int) []string {
	return []string{
		"--port", "0",
		"--tls-port", fmt.Sprint(port),
		"--tls-cert-file", f.certFile,
		"--tls-key-file", f.keyFile,
		"--tls-ca-cert-file", f.caFile,
		"--tls-auth-clients", "no",
	}
}
