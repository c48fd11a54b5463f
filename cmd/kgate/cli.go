package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kgate/kgate/cluster"
	"github.com/kgate/kgate/gateway/certs"
)

// commands are kgate's subcommands other than serve and version: each
// takes its arguments, writes its answer to out and its errors to errOut,
// and returns the exit status.
var commands = map[string]func(args []string, out, errOut io.Writer) int{
	"status":   runStatus,
	"topics":   runTopics,
	"groups":   runGroups,
	"leave":    runLeave,
	"health":   runHealth,
	"snapshot": runSnapshot,
}

// adminCLI is what every admin command shares: which node's admin API to
// ask, and whether to print JSON for scripts instead of tables.
type adminCLI struct {
	admin   string
	json    bool
	timeout time.Duration
	out     io.Writer
	http    *http.Client
	scheme  string // of bare host:port admin addresses: http, or https with --admin-tls-*
}

// parseAdminFlags parses an admin command's flags; --admin defaults to
// KGATE_ADMIN, then 127.0.0.1:9095 (kgate serve's default admin address).
func parseAdminFlags(name string, args []string, errOut io.Writer, positional string) (*adminCLI, []string, error) {
	c := &adminCLI{}
	fs := flag.NewFlagSet("kgate "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	def := "127.0.0.1:9095"
	if v, ok := os.LookupEnv("KGATE_ADMIN"); ok {
		def = v
	}
	fs.StringVar(&c.admin, "admin", def, "admin address (host:port or http://host:port) of any node (env KGATE_ADMIN)")
	fs.BoolVar(&c.json, "json", false, "print the admin API's JSON instead of tables")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up after this long")
	tokenDef, _ := os.LookupEnv("KGATE_ADMIN_TOKEN_FILE")
	tokenFile := fs.String("admin-token-file", tokenDef, "file holding the admin API's bearer token, for nodes started with --admin-token-file (env KGATE_ADMIN_TOKEN_FILE)")
	caDef, _ := os.LookupEnv("KGATE_ADMIN_TLS_CA")
	caFile := fs.String("admin-tls-ca", caDef, "PEM CA certificates the admin API's certificate is checked against; speaks HTTPS (env KGATE_ADMIN_TLS_CA)")
	certDef, _ := os.LookupEnv("KGATE_ADMIN_TLS_CERT")
	certFile := fs.String("admin-tls-cert", certDef, "PEM client certificate for nodes started with --admin-tls-client-ca (env KGATE_ADMIN_TLS_CERT)")
	keyDef, _ := os.LookupEnv("KGATE_ADMIN_TLS_KEY")
	keyFile := fs.String("admin-tls-key", keyDef, "PEM key of --admin-tls-cert (env KGATE_ADMIN_TLS_KEY)")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: kgate %s [flags] %s\n", name, positional)
		fs.PrintDefaults()
	}
	// Flags may come before or after the positional arguments.
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	c.http = &http.Client{Timeout: c.timeout}
	c.scheme = "http"
	var transport http.RoundTripper = http.DefaultTransport
	if *caFile != "" || *certFile != "" || strings.HasPrefix(c.admin, "https://") {
		tc, err := adminClientTLS(*caFile, *certFile, *keyFile)
		if err != nil {
			return nil, nil, err
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tc
		transport, c.scheme = t, "https"
	}
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--admin-token-file: %w", err)
		}
		transport = bearer{token: strings.TrimSpace(string(tok)), next: transport}
	}
	c.http.Transport = transport
	return c, rest, nil
}

// adminClientTLS is the CLI's TLS configuration: the CA to trust (the
// system roots without one) and the client certificate, if any.
func adminClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := certs.LoadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("--admin-tls-ca: %w", err)
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--admin-tls-cert and --admin-tls-key: give both or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--admin-tls-cert: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// bearer adds the admin API's token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// url is the admin API URL of path on addr (host:port or an http(s) URL).
func (c *adminCLI) url(addr, path string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/") + path
	}
	return c.scheme + "://" + addr + path
}

// get fetches path and returns the body of a 200 answer.
func (c *adminCLI) get(path string) ([]byte, error) {
	return c.do(http.MethodGet, c.admin, path)
}

func (c *adminCLI) do(method, addr, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.url(addr, path), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Error)
		}
		return nil, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return body, nil
}

// view fetches path and decodes the answer into v; with --json it prints
// the answer instead and reports printed.
func (c *adminCLI) view(path string, v any) (printed bool, err error) {
	body, err := c.get(path)
	if err != nil {
		return false, err
	}
	if c.json {
		return true, c.printJSON(body)
	}
	return false, json.Unmarshal(body, v)
}

// printJSON re-indents an admin API answer for --json.
func (c *adminCLI) printJSON(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := c.out.Write(buf.Bytes())
	return err
}

// runAdmin is the frame of every admin command: parse flags, run, report.
func runAdmin(name, positional string, args []string, out, errOut io.Writer, nargs func(int) bool,
	run func(c *adminCLI, args []string) error) int {
	c, rest, err := parseAdminFlags(name, args, errOut, positional)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if !nargs(len(rest)) {
		fmt.Fprintf(errOut, "usage: kgate %s [flags] %s\n", name, positional)
		return 2
	}
	c.out = out
	if err := run(c, rest); err != nil {
		fmt.Fprintf(errOut, "kgate %s: %v\n", name, err)
		return 1
	}
	return 0
}

func none(n int) bool { return n == 0 }

type statusView struct {
	ClusterID string               `json:"cluster_id"`
	LeaderID  *int32               `json:"leader_id"`
	Nodes     []cluster.MemberInfo `json:"nodes"`
}

// runStatus: kgate status — the cluster id, the leader and every node.
func runStatus(args []string, out, errOut io.Writer) int {
	return runAdmin("status", "", args, out, errOut, none, func(c *adminCLI, _ []string) error {
		var v statusView
		if printed, err := c.view("/v1/cluster", &v); printed || err != nil {
			return err
		}
		leader := "none"
		if v.LeaderID != nil {
			leader = strconv.Itoa(int(*v.LeaderID))
		}
		fmt.Fprintf(out, "cluster %s  leader %s\n\n", v.ClusterID, leader)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tSTATE\tVOTER\tLEADER\tKAFKA\tRAFT\tGOSSIP\tADMIN")
		for _, n := range v.Nodes {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.GossipState, yesNo(n.Voter), yesNo(n.Leader),
				n.KafkaAddr, n.RaftAddr, n.GossipAddr, n.AdminAddr)
		}
		return tw.Flush()
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

type topicsView struct {
	Topics []struct {
		Name       string `json:"name"`
		SizeBytes  *int64 `json:"size_bytes"`
		Partitions []struct {
			Partition      int32  `json:"partition"`
			Leader         int32  `json:"leader"`
			LogStartOffset int64  `json:"log_start_offset"`
			HighWatermark  int64  `json:"high_watermark"`
			SizeBytes      *int64 `json:"size_bytes"`
			Error          string `json:"error"`
		} `json:"partitions"`
	} `json:"topics"`
}

// runTopics: kgate topics — every partition of every topic with its
// leader, offsets and size.
func runTopics(args []string, out, errOut io.Writer) int {
	return runAdmin("topics", "", args, out, errOut, none, func(c *adminCLI, _ []string) error {
		var v topicsView
		if printed, err := c.view("/v1/topics", &v); printed || err != nil {
			return err
		}
		sort.Slice(v.Topics, func(i, j int) bool { return v.Topics[i].Name < v.Topics[j].Name })
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tSTART\tEND\tRECORDS\tSIZE")
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				if p.Error != "" {
					fmt.Fprintf(tw, "%s\t%d\t%d\t-\t-\t-\t%s\n", t.Name, p.Partition, p.Leader, p.Error)
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Name, p.Partition, p.Leader, p.LogStartOffset,
					p.HighWatermark, p.HighWatermark-p.LogStartOffset, bytesOrDash(p.SizeBytes))
			}
		}
		return tw.Flush()
	})
}

func bytesOrDash(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

type groupsView struct {
	Groups []struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Generation   int32  `json:"generation"`
		Members      int    `json:"members"`
	} `json:"groups"`
}

type groupView struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	Protocol   string `json:"protocol"`
	Generation int32  `json:"generation"`
	Leader     string `json:"leader"`
	Members    []struct {
		MemberID   string `json:"member_id"`
		InstanceID string `json:"instance_id"`
		ClientID   string `json:"client_id"`
		ClientHost string `json:"client_host"`
		Assignment []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignment"`
	} `json:"members"`
	Offsets []struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		Committed     *int64 `json:"committed"`
		HighWatermark int64  `json:"high_watermark"`
		Lag           *int64 `json:"lag"`
		Member        string `json:"member"`
		Error         string `json:"error"`
	} `json:"offsets"`
	TotalLag int64 `json:"total_lag"`
}

// runGroups: kgate groups lists the groups; kgate groups GROUP shows one
// group's members, their assignment, and committed offset and lag per
// partition.
func runGroups(args []string, out, errOut io.Writer) int {
	return runAdmin("groups", "[GROUP]", args, out, errOut, func(n int) bool { return n <= 1 }, func(c *adminCLI, rest []string) error {
		if len(rest) == 1 {
			return c.showGroup(rest[0])
		}
		var v groupsView
		if printed, err := c.view("/v1/groups", &v); printed || err != nil {
			return err
		}
		sort.Slice(v.Groups, func(i, j int) bool { return v.Groups[i].Group < v.Groups[j].Group })
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tSTATE\tTYPE\tGENERATION\tMEMBERS")
		for _, g := range v.Groups {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", g.Group, g.State, g.ProtocolType, g.Generation, g.Members)
		}
		return tw.Flush()
	})
}

func (c *adminCLI) showGroup(id string) error {
	var g groupView
	if printed, err := c.view("/v1/groups/"+url.PathEscape(id), &g); printed || err != nil {
		return err
	}
	fmt.Fprintf(c.out, "group %s  state %s  generation %d  protocol %s  total lag %d\n\n", g.Group, g.State, g.Generation,
		orDash(g.Protocol), g.TotalLag)
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tASSIGNMENT")
	for _, m := range g.Members {
		var parts []string
		for _, a := range m.Assignment {
			ps := make([]string, len(a.Partitions))
			for i, p := range a.Partitions {
				ps[i] = strconv.Itoa(int(p))
			}
			parts = append(parts, a.Topic+":"+strings.Join(ps, ","))
		}
		lead := ""
		if m.MemberID == g.Leader {
			lead = " (leader)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", m.MemberID, lead, m.ClientID, m.ClientHost, orDash(strings.Join(parts, " ")))
	}
	fmt.Fprintln(tw, "\t\t\t")
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
	for _, o := range g.Offsets {
		end := strconv.FormatInt(o.HighWatermark, 10)
		if o.Error != "" {
			end = o.Error
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", o.Topic, o.Partition, bytesOrDash(o.Committed), end, bytesOrDash(o.Lag), orDash(o.Member))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runLeave: kgate leave NODE — the node leaves the cluster gracefully
// (POST /v1/leave on its own admin API, found through --admin's
// /v1/cluster): leadership moves away if it led, and the leader removes it
// from the voters. Then stop its process.
func runLeave(args []string, out, errOut io.Writer) int {
	return runAdmin("leave", "NODE", args, out, errOut, func(n int) bool { return n == 1 }, func(c *adminCLI, rest []string) error {
		id, err := strconv.Atoi(rest[0])
		if err != nil {
			return fmt.Errorf("NODE must be a node id, not %q", rest[0])
		}
		body, err := c.get("/v1/cluster")
		if err != nil {
			return err
		}
		var v statusView
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		addr := ""
		for _, n := range v.Nodes {
			if int(n.ID) == id {
				addr = n.AdminAddr
			}
		}
		if addr == "" {
			return fmt.Errorf("node %d is not in the cluster (kgate status lists the nodes)", id)
		}
		addr = c.reachable(addr)
		res, err := c.do(http.MethodPost, addr, "/v1/leave")
		if err != nil {
			return fmt.Errorf("node %d at %s: %w", id, addr, err)
		}
		if c.json {
			return c.printJSON(res)
		}
		fmt.Fprintf(out, "node %d left the cluster; stop its process now\n", id)
		return nil
	})
}

// reachable is a node's advertised admin address, or, when that binds every
// interface, the same port on the host --admin named.
func (c *adminCLI) reachable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
		return addr
	}
	asked, _, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(c.admin, "http://"), "https://"))
	return net.JoinHostPort(asked, port)
}

// leaderAdmin is the admin address of the Raft leader, found through
// --admin's /v1/cluster.
func (c *adminCLI) leaderAdmin() (string, error) {
	body, err := c.get("/v1/cluster")
	if err != nil {
		return "", err
	}
	var v statusView
	if err := json.Unmarshal(body, &v); err != nil {
		return "", err
	}
	if v.LeaderID == nil {
		return "", errors.New("the cluster has no leader now; try again")
	}
	for _, n := range v.Nodes {
		if n.ID == *v.LeaderID && n.AdminAddr != "" {
			return c.reachable(n.AdminAddr), nil
		}
	}
	return "", fmt.Errorf("leader %d has no admin address", *v.LeaderID)
}

// runHealth: kgate health — exit 0 when the node at --admin is ready
// (GET /readyz), 1 with the reason otherwise. For container health checks,
// where there is no curl.
func runHealth(args []string, out, errOut io.Writer) int {
	return runAdmin("health", "", args, out, errOut, none, func(c *adminCLI, _ []string) error {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(c.admin, "/readyz"), nil)
		if err != nil {
			return err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("not ready: %s", strings.TrimSpace(string(body)))
		}
		if c.json {
			return c.printJSON(body)
		}
		fmt.Fprintln(out, "ready")
		return nil
	})
}

// runSnapshot: kgate snapshot save FILE | kgate snapshot restore FILE.
func runSnapshot(args []string, out, errOut io.Writer) int {
	if len(args) < 2 || (args[0] != "save" && args[0] != "restore") {
		fmt.Fprint(errOut, "usage: kgate snapshot save FILE [--admin ADDR]\n"+
			"       kgate snapshot restore FILE [kgate serve flags: --data-dir, --node-id, --raft-addr, --advertise-raft-addr or --config]\n")
		return 2
	}
	if args[0] == "save" {
		return runAdmin("snapshot save", "FILE", args[1:], out, errOut, func(n int) bool { return n == 1 }, saveSnapshot)
	}
	file := args[1]
	cfg, err := parseConfig(args[2:], os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(errOut, "kgate snapshot restore:", err)
		return 2
	}
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintln(errOut, "kgate snapshot restore:", err)
		return 1
	}
	defer f.Close()
	meta, err := cluster.RestoreSnapshot(cfg.DataDir, int32(cfg.NodeID), cfg.AdvertiseRaftAddr, f)
	if err != nil {
		fmt.Fprintln(errOut, "kgate snapshot restore:", err)
		return 1
	}
	fmt.Fprintf(out, "restored snapshot of cluster %s (index %d, %d bytes) into %s as node %d, the only voter at %s;\n"+
		"start it with kgate serve and these settings, then join new nodes to it\n",
		meta.ClusterID, meta.Index, meta.Size, cfg.DataDir, cfg.NodeID, cfg.AdvertiseRaftAddr)
	return 0
}

// saveSnapshot downloads GET /v1/snapshot from the leader into FILE
// (through a temporary file, so FILE is complete or absent). The leader
// has applied every committed entry; a follower may trail it.
func saveSnapshot(c *adminCLI, rest []string) error {
	file := rest[0]
	leader, err := c.leaderAdmin()
	if err != nil {
		return err
	}
	c.http.Timeout = 0 // a large snapshot may take longer than --timeout to copy
	req, err := http.NewRequest(http.MethodGet, c.url(leader, "/v1/snapshot"), nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET /v1/snapshot: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".kgate-snapshot-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	meta, err := cluster.ReadSnapshotHeader(br)
	if err == nil {
		err = cluster.WriteSnapshotFile(tmp, meta, io.LimitReader(br, meta.Size))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("saving %s: %w", file, err)
	}
	if c.json {
		b, _ := json.Marshal(meta)
		return c.printJSON(b)
	}
	fmt.Fprintf(c.out, "saved snapshot of cluster %s from node %d (index %d, term %d, %d bytes) to %s\n",
		meta.ClusterID, meta.NodeID, meta.Index, meta.Term, meta.Size, file)
	return nil
}
