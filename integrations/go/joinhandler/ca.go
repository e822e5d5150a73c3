package joinhandler

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CAError is a CA that cannot sign etcd's certificates. Code is stable: "ca_unreadable",
// "ca_key_unsupported", "ca_key_mismatch", "ca_not_a_ca", "ca_cannot_sign" or "ca_not_valid_now";
// the message names the file and what is wrong with it.
type CAError struct {
	Code string
	Err  error
}

func (e *CAError) Error() string { return e.Err.Error() }
func (e *CAError) Unwrap() error { return e.Err }

// AcceptedCAKeys are the CA keys LoadCA takes, as its refusal of another one says.
const AcceptedCAKeys = "RSA 2048–4096 bits, ECDSA P-256 or P-384, or Ed25519"

// LoadCA reads the cluster's etcd CA from DIR/ca.crt and DIR/ca.key (the layout of the agent's
// --pki-dir, kubeadm's /etc/kubernetes/pki/etcd and k0s's /var/lib/k0s/pki/etcd) and checks that
// it can sign what etcd accepts, now. See ParseCA.
func LoadCA(dir string) (*CASigner, error) {
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, &CAError{"ca_unreadable", err}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, &CAError{"ca_unreadable", err}
	}
	return ParseCA(certPEM, keyPEM, CAFiles{Cert: certFile, Key: keyFile}, time.Now())
}

// CAFiles name where a CA's PEM came from, for messages.
type CAFiles struct{ Cert, Key string }

// ParseCA takes the CA as kubeadm, k0s (cfssl), openssl and Go tools write it: the key RSA 2048
// to 4096 bits (PKCS#1 "RSA PRIVATE KEY" or PKCS#8), ECDSA P-256 or P-384 (SEC1 "EC PRIVATE KEY"
// or PKCS#8) or Ed25519 (PKCS#8), unencrypted. It refuses, as a *CAError, a key that is not the
// certificate's, a certificate that is no CA (basic constraints), may not sign certificates (key
// usage without certSign, or an extended key usage without both TLS server and client: Go, and
// so etcd, applies a CA's extended key usage to every certificate below it), or is not valid at
// now. What the signer then issues is signed with the algorithm the key calls for, its issuer is
// the CA's subject as encoded in it and its authority key identifier the CA's subject key
// identifier (x509.CreateCertificate copies both from the parent).
func ParseCA(certPEM, keyPEM []byte, files CAFiles, now time.Time) (*CASigner, error) {
	if files.Cert == "" {
		files.Cert = "the CA certificate"
	}
	if files.Key == "" {
		files.Key = "the CA key"
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, &CAError{"ca_unreadable", fmt.Errorf("%s is not a PEM certificate", files.Cert)}
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, &CAError{"ca_unreadable", fmt.Errorf("%s is not a PEM certificate: %w", files.Cert, err)}
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, &CAError{"ca_unreadable", fmt.Errorf("%s is not a PEM private key (PKCS#1, SEC1 or PKCS#8): %w", files.Key, err)}
	}
	if kind := unsupportedKey(key); kind != "" {
		return nil, &CAError{"ca_key_unsupported", fmt.Errorf("%s holds %s; an etcd CA key here is %s", files.Key, kind, AcceptedCAKeys)}
	}
	named := fmt.Sprintf("%s (%s)", files.Cert, ca.Subject)
	if !samePublicKey(key.Public(), ca.PublicKey) {
		return nil, &CAError{"ca_key_mismatch", fmt.Errorf("%s is not the key of %s: the certificate's public key is another one", files.Key, named)}
	}
	if !ca.BasicConstraintsValid || !ca.IsCA {
		return nil, &CAError{"ca_not_a_ca", fmt.Errorf("%s is not a CA certificate (basic constraints): etcd would refuse every certificate signed with it", named)}
	}
	if ca.KeyUsage != 0 && ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, &CAError{"ca_cannot_sign", fmt.Errorf("%s may not sign certificates: its key usage lacks certSign", named)}
	}
	if len(ca.ExtKeyUsage) > 0 || len(ca.UnknownExtKeyUsage) > 0 {
		if !slices.Contains(ca.ExtKeyUsage, x509.ExtKeyUsageAny) && !(slices.Contains(ca.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && slices.Contains(ca.ExtKeyUsage, x509.ExtKeyUsageClientAuth)) {
			return nil, &CAError{"ca_cannot_sign", fmt.Errorf("%s limits what it signs by its extended key usage: etcd uses each certificate as a TLS server and a TLS client, so it needs serverAuth and clientAuth (or none)", named)}
		}
	}
	if now.Before(ca.NotBefore) {
		return nil, &CAError{"ca_not_valid_now", fmt.Errorf("%s is not valid before %s", named, ca.NotBefore.UTC().Format(time.RFC3339))}
	}
	if !now.Before(ca.NotAfter) {
		return nil, &CAError{"ca_not_valid_now", fmt.Errorf("%s expired on %s", named, ca.NotAfter.UTC().Format(time.RFC3339))}
	}
	return &CASigner{CA: ca, Key: key}, nil
}

func parsePrivateKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if strings.Contains(block.Type, "ENCRYPTED") || block.Headers["Proc-Type"] != "" {
		return nil, errors.New("it is encrypted: the CA key must be readable without a passphrase")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("a PEM %q block", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return signer, nil
}

// unsupportedKey names a key that cannot be the CA's here, or is "" for one that can.
func unsupportedKey(key crypto.Signer) string {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if bits := k.N.BitLen(); bits < 2048 || bits > 4096 {
			return fmt.Sprintf("an RSA %d key", bits)
		}
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return "an ECDSA key on curve " + k.Curve.Params().Name
		}
	case ed25519.PrivateKey:
	default:
		return fmt.Sprintf("a %T key", key)
	}
	return ""
}

func samePublicKey(a, b crypto.PublicKey) bool {
	der1, err1 := x509.MarshalPKIXPublicKey(a)
	der2, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && bytes.Equal(der1, der2)
}
