package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kgate/kgate/gateway/certs"
)

// runCerts is `kgate certs`: a new CA and one certificate per name, each
// valid for server and client use, for a test cluster. Production clusters
// use their own PKI (docs/security.md has the openssl equivalent).
func runCerts(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("kgate certs", flag.ContinueOnError)
	dir := fs.String("dir", "kgate-certs", "directory to write ca.pem and <name>.pem / <name>-key.pem into")
	names := fs.String("names", "node-1,node-2,node-3,client", "comma list of certificate names (the subject common name)")
	hosts := fs.String("hosts", "127.0.0.1,localhost", "comma list of host names and IP addresses every certificate is valid for")
	valid := fs.Duration("valid-for", 365*24*time.Hour, "validity of the CA and the certificates")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	ca, err := certs.NewCA("kgate test CA", *valid)
	if err != nil {
		return err
	}
	caPath := filepath.Join(*dir, "ca.pem")
	if err := os.WriteFile(caPath, ca.CertPEM, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(out, "wrote", caPath)
	hostList := strings.Split(*hosts, ",")
	for _, n := range strings.Split(*names, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		is, err := ca.Issue(n, hostList, *valid)
		if err != nil {
			return err
		}
		c, k, err := is.WriteFiles(*dir, n)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "wrote", c, k)
	}
	return nil
}
