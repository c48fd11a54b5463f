package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// groupsConfig configures the groups and joinstorm subcommands.
type groupsConfig struct {
	mode        string // "groups" or "joinstorm"
	brokers     []string
	label       string
	topicPrefix string
	groupPrefix string
	partitions  int

	members           int
	groups            int
	membersPerConn    int // on JoinGroup/SyncGroup connections
	heartbeatsPerConn int // on Heartbeat connections

	heartbeat time.Duration
	// spread starts each member's heartbeats at a random point of the
	// interval after it joins, instead of one interval after its
	// SyncGroup (see the usage).
	spread       bool
	session      time.Duration
	rebalance    time.Duration
	window       time.Duration // measured heartbeat window; 0 = none
	settle       time.Duration // after all groups are Stable, before the window
	setupTimeout time.Duration // for every group to become Stable
	target       time.Duration // time-to-stable target; 0 = none

	leaderPID int // kgate (or broker) process whose CPU is measured; 0 = none

	json    bool
	verbose bool
}

const groupsUsage = `kgate-bench groups: simulated classic-protocol consumer group members.

-members members in -groups groups on one topic (members spread evenly, the
groups' members kept together) run JoinGroup (answering MEMBER_ID_REQUIRED),
SyncGroup (the leader sends a round-robin assignment) and then Heartbeat
every -heartbeat. Members are not kgo clients but raw connections to their
group's coordinator, one per member as a real client has (Kafka and kgate
serve a connection's requests one after another, so a parked JoinGroup holds
up everything behind it). With -heartbeats-per-conn above 1, Heartbeats and
first JoinGroups go over connections shared by that many members instead,
and a heartbeat's latency includes the wait behind those queued before it.

Members that join in the same rebalance (here: all 1,000 groups within
the same few hundred milliseconds) would otherwise heartbeat together, all
10,000 in the same instant every interval, so each member's first
heartbeat comes at a random point of the interval (-heartbeat-spread):
the load is then the steady rate the interval gives.

It reports the time until every member completed its first SyncGroup (all
groups Stable), and over a -window of steady heartbeating: heartbeat latency
(from write to answer) p50/p99/max, error codes, rebalances, and the CPU of
-leader-pid (the coordinator's process) as a percentage of one core.

Usage: kgate-bench groups [flags]

`

const joinstormUsage = `kgate-bench joinstorm: -members members join one empty group at once.

Same members as the groups subcommand. Reports the time from the first
JoinGroup until every member has completed SyncGroup (the group is Stable),
against -target (kgate's initial rebalance delay of 3s plus 1s).

Usage: kgate-bench joinstorm [flags]

`

func parseGroupsConfig(mode string, args []string, output io.Writer) (groupsConfig, error) {
	cfg := groupsConfig{mode: mode}
	var brokers string
	fs := flag.NewFlagSet("kgate-bench "+mode, flag.ContinueOnError)
	fs.SetOutput(output)
	usage := groupsUsage
	defMembers, defGroups, defWindow, defTarget := 10000, 1000, 60*time.Second, time.Duration(0)
	if mode == "joinstorm" {
		usage = joinstormUsage
		defMembers, defGroups, defWindow, defTarget = 500, 1, 0, 4*time.Second
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated bootstrap `addresses`")
	fs.StringVar(&cfg.label, "label", "", "target label shown in the report (default: the first broker address)")
	fs.StringVar(&cfg.topicPrefix, "topic-prefix", "kgate-bench-"+mode, "prefix of the topic created for the run")
	fs.StringVar(&cfg.groupPrefix, "group-prefix", "kgate-bench-"+mode, "prefix of the group ids (a random suffix is added)")
	fs.IntVar(&cfg.partitions, "partitions", 10, "partitions of the topic the groups consume (what the leaders assign)")
	fs.IntVar(&cfg.members, "members", defMembers, "members in all")
	fs.IntVar(&cfg.groups, "groups", defGroups, "groups")
	fs.IntVar(&cfg.membersPerConn, "members-per-conn", 1, "members sharing a JoinGroup/SyncGroup connection: 1, the only value that works (a connection's requests are served in order, and a parked JoinGroup would hold the others)")
	fs.IntVar(&cfg.heartbeatsPerConn, "heartbeats-per-conn", 1, "members sharing a Heartbeat connection (1: each member heartbeats on its own connection)")
	fs.DurationVar(&cfg.heartbeat, "heartbeat", 3*time.Second, "heartbeat interval")
	fs.BoolVar(&cfg.spread, "heartbeat-spread", true, "start each member's heartbeats at a random point of the interval (false: one interval after its SyncGroup, so members that joined together heartbeat together)")
	fs.DurationVar(&cfg.session, "session-timeout", 45*time.Second, "session timeout members ask for")
	fs.DurationVar(&cfg.rebalance, "rebalance-timeout", 60*time.Second, "rebalance timeout members ask for")
	fs.DurationVar(&cfg.window, "window", defWindow, "measured heartbeat window after every group is Stable (0 = stop once Stable)")
	fs.DurationVar(&cfg.settle, "settle", 3*time.Second, "wait after every group is Stable before the window opens")
	fs.DurationVar(&cfg.setupTimeout, "setup-timeout", 5*time.Minute, "give up if the groups are not all Stable after this long")
	fs.DurationVar(&cfg.target, "target", defTarget, "time-to-Stable target shown in the report (0 = none)")
	fs.IntVar(&cfg.leaderPID, "leader-pid", 0, "`pid` of the coordinator process whose CPU is measured over the window (0 = not measured)")
	fs.BoolVar(&cfg.json, "json", false, "print the result as JSON instead of a table")
	fs.BoolVar(&cfg.verbose, "v", false, "verbose logging, including the Kafka client's")
	if err := fs.Parse(args); err != nil {
		return groupsConfig{}, err
	}
	if fs.NArg() > 0 {
		return groupsConfig{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.brokers, err = splitList(brokers); err != nil {
		return groupsConfig{}, fmt.Errorf("-brokers: %w", err)
	}
	if cfg.label == "" {
		cfg.label = cfg.brokers[0]
	}
	switch {
	case cfg.groups < 1:
		return groupsConfig{}, errors.New("-groups must be at least 1")
	case cfg.members < cfg.groups:
		return groupsConfig{}, errors.New("-members must be at least -groups")
	case cfg.membersPerConn != 1:
		return groupsConfig{}, errors.New("-members-per-conn must be 1: a connection's requests are served one after another, and a member's parked JoinGroup would hold up the others on its connection until the rebalance timeout")
	case cfg.heartbeatsPerConn < 1:
		return groupsConfig{}, errors.New("-heartbeats-per-conn must be at least 1")
	case cfg.partitions < 1:
		return groupsConfig{}, errors.New("-partitions must be at least 1")
	case cfg.heartbeat <= 0 || cfg.session <= 0 || cfg.rebalance <= 0 || cfg.setupTimeout <= 0:
		return groupsConfig{}, errors.New("-heartbeat, -session-timeout, -rebalance-timeout and -setup-timeout must be positive")
	case cfg.window < 0 || cfg.settle < 0 || cfg.target < 0:
		return groupsConfig{}, errors.New("-window, -settle and -target must not be negative")
	case cfg.leaderPID < 0:
		return groupsConfig{}, errors.New("-leader-pid must not be negative")
	}
	return cfg, nil
}
