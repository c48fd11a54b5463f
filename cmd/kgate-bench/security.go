package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// securityFlags connect kgate-bench to a TLS and SASL listener (SASL_SSL).
type securityFlags struct {
	tlsCA     string
	mechanism string
	user      string
	password  string
	// admin is a PLAIN user:password that creates the SCRAM user first.
	admin string
}

func (s *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tlsCA, "tls-ca", "", "connect over TLS, trusting the CA certificates in this PEM `file`")
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "authenticate with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&s.user, "sasl-user", "", "SASL user")
	fs.StringVar(&s.password, "sasl-password", "", "SASL password")
	fs.StringVar(&s.admin, "sasl-create-user-as", "", "PLAIN `user:password` that creates the SCRAM -sasl-user before the runs")
}

// opts are the client options for TLS and SASL.
func (s *securityFlags) opts() ([]kgo.Opt, error) {
	var out []kgo.Opt
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca: no certificates in %s", s.tlsCA)
		}
		out = append(out, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	if s.mechanism != "" {
		m, err := mechanism(s.mechanism, s.user, s.password)
		if err != nil {
			return nil, err
		}
		out = append(out, kgo.SASL(m))
	}
	return out, nil
}

func mechanism(name, user, password string) (sasl.Mechanism, error) {
	switch strings.ToUpper(name) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("-sasl-mechanism: %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", name)
}

// createScramUser upserts -sasl-user's SCRAM credential as the PLAIN admin.
func (s *securityFlags) createScramUser(ctx context.Context, brokers []string) error {
	if s.admin == "" {
		return nil
	}
	user, pass, ok := strings.Cut(s.admin, ":")
	if !ok {
		return errors.New("-sasl-create-user-as: want user:password")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())}
	sec := *s
	sec.mechanism = ""
	tlsOpts, err := sec.opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, tlsOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	mech := kadm.ScramSha512
	if strings.ToUpper(s.mechanism) == "SCRAM-SHA-256" {
		mech = kadm.ScramSha256
	}
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: s.user, Mechanism: mech, Iterations: 4096, Password: s.password}})
	if err != nil {
		return err
	}
	return res.Error()
}
