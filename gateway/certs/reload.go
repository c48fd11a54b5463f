// Package certs serves TLS certificates that can be replaced while the
// listener runs, and makes a small certificate authority for test clusters
// (`kgate certs`).
package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of one TLS endpoint.
type Files struct {
	Cert     string // certificate chain, leaf first
	Key      string // private key of the leaf
	ClientCA string // optional: CA certificates that sign client certificates (mutual TLS)
}

// Reloader holds the current certificate and client CA pool. Reload reads
// the files again; a failed reload keeps the previous material, so a
// half-written file never takes the listener down.
type Reloader struct {
	files Files
	log   *slog.Logger

	mu       sync.RWMutex
	cert     *tls.Certificate
	clientCA *x509.CertPool
	chainCAs *x509.CertPool // CA certificates that follow the leaf in the cert file
	stamp    string         // sizes and mtimes of the files last loaded
}

// NewReloader loads the files once; an error here is a start-up error.
func NewReloader(files Files, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Reloader{files: files, log: log}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again and switches to them if they are valid.
func (r *Reloader) Reload() error {
	stamp := r.fileStamp()
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return fmt.Errorf("load certificate %s and key %s: %w", r.files.Cert, r.files.Key, err)
	}
	var pool *x509.CertPool
	if r.files.ClientCA != "" {
		pool, err = LoadPool(r.files.ClientCA)
		if err != nil {
			return err
		}
	}
	chain, err := x509.SystemCertPool()
	if err != nil {
		chain = x509.NewCertPool()
	}
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			chain.AddCert(c)
		}
	}
	r.mu.Lock()
	r.cert, r.clientCA, r.chainCAs, r.stamp = &cert, pool, chain, stamp
	r.mu.Unlock()
	return nil
}

// LoadPool reads a PEM file of CA certificates.
func LoadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificates in %s", path)
	}
	return pool, nil
}

func (r *Reloader) fileStamp() string {
	s := ""
	for _, p := range []string{r.files.Cert, r.files.Key, r.files.ClientCA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			s += "missing;"
		}
	}
	return s
}

// Watch reloads when a file changes (checked every interval) or when
// hup receives, until ctx ends.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reloadAndLog("signal")
		case <-t.C:
			r.mu.RLock()
			old := r.stamp
			r.mu.RUnlock()
			if r.fileStamp() != old {
				r.reloadAndLog("file change")
			}
		}
	}
}

func (r *Reloader) reloadAndLog(why string) {
	if err := r.Reload(); err != nil {
		// Remember the stamp so a broken file is reported once, not every tick.
		r.mu.Lock()
		r.stamp = r.fileStamp()
		r.mu.Unlock()
		r.log.Error("TLS certificate reload failed; keeping the previous certificate", "cause", why, "err", err)
		return
	}
	r.log.Info("TLS certificate reloaded", "cause", why, "cert", r.files.Cert)
}

// Certificate is the current certificate.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert
}

// ServerConfig is a TLS 1.2+ server configuration that picks up reloaded
// material on every handshake. With a client CA, clients must present a
// certificate it signs.
func (r *Reloader) ServerConfig() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		r.mu.RLock()
		cert, pool := r.cert, r.clientCA
		r.mu.RUnlock()
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}}
		if pool != nil {
			c.ClientCAs = pool
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
		return c, nil
	}
	return base
}

// ClientConfig is the configuration a node uses to reach another node's
// listener: it presents its own certificate and trusts the client CA (the
// cluster's CA) when one is configured, else the system roots and the CA
// certificates that follow the leaf in its own certificate file.
func (r *Reloader) ClientConfig() *tls.Config {
	r.mu.RLock()
	pool := r.clientCA
	if pool == nil {
		pool = r.chainCAs
	}
	r.mu.RUnlock()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c := r.Certificate(); c != nil {
				return c, nil
			}
			return nil, errors.New("no certificate loaded")
		},
	}
}
