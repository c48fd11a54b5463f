# kgate — see README.md. `make test` is what CI runs.
GO       ?= go
FUZZTIME ?= 5s

.PHONY: build run test unit e2e e2e-iggy e2e-iggy-real kafka-rules fuzz fuzz-long bench bench-short failover-bench chaos chaos-short chaos-raft lint deps clean

build:
	$(GO) build -o bin/kgate ./cmd/kgate
	$(GO) build -o bin/kgate-bench ./cmd/kgate-bench
	$(GO) build -o bin/iggy-double ./test/iggydouble

# A local three-node cluster on loopback (Kafka ports 9092, 9094, 9096),
# data in ./kgate-data; Ctrl-C stops it. KGATE_NODES=1 make run for one node.
run: build
	./scripts/run-cluster.sh

deps:
	./scripts/install-test-deps.sh

# The Iggy tier: the client scenarios and consumer-group tests again, on a
# three-node cluster with --backend iggy: once against the Iggy test double
# (current dialect; its fault injection reaches what a real server cannot),
# then against each real iggy-server in ../shared/iggy (IGGY_SHARED), in its
# dialect and with --iggy-protocol auto (scripts/iggy-real-tier.sh; without
# the folder that tier says it was skipped).
IGGY_E2E ?= TestFranzGo|TestSarama|TestKcat|TestConfluentKafkaPython$$|TestKafkaPython$$|TestKafkaJS$$|TestJavaClients|TestIdempotentKill9|TestGroup|TestIggy|TestJavaTransactions$$|TestClusterTransactionsLeaderKill9|TestClusterGroupTransactSessionLeaderKill9

test: deps build lint
	GO='$(GO)' ./scripts/go-test.sh -race -count=1 -timeout 45m ./...
	KGATE_E2E_BACKEND=iggy GO='$(GO)' ./scripts/go-test.sh -race -count=1 -timeout 60m -run '$(IGGY_E2E)|TestKafkaTools' ./test/e2e/
	$(MAKE) e2e-iggy-real
	$(MAKE) kafka-rules
	$(MAKE) chaos-short
	$(MAKE) bench-short
	$(MAKE) fuzz

# Only the Iggy tier against the double (KGATE_E2E_IGGY_DIALECT=legacy for
# the legacy dialect, IGGY_SERVER_BIN=/path/to/iggy-server for a real server).
e2e-iggy: build
	KGATE_E2E_BACKEND=iggy $(GO) test -race -count=1 -timeout 60m -run '$(IGGY_E2E)' ./test/e2e/ -v

# Only the real-server Iggy tier (the real servers of ../shared/iggy).
e2e-iggy-real: build
	GO='$(GO)' IGGY_E2E='$(IGGY_E2E)' ./scripts/iggy-real-tier.sh

# Each fuzz target for a few seconds (FUZZTIME); fuzz-long for a real run.
fuzz:
	$(GO) test -run=NONE -fuzz=FuzzParseRequest -fuzztime=$(FUZZTIME) ./gateway/
	$(GO) test -run=NONE -fuzz=FuzzValidate -fuzztime=$(FUZZTIME) ./gateway/records/
	$(GO) test -run=NONE -fuzz=FuzzDecode -fuzztime=$(FUZZTIME) ./fsm/
	$(GO) test -run=NONE -fuzz=FuzzDecodeReply -fuzztime=$(FUZZTIME) ./gateway/iggy/
	$(GO) test -run=NONE -fuzz=FuzzDecodeMessage -fuzztime=$(FUZZTIME) ./gateway/iggybackend/
	$(GO) test -run=NONE -fuzz=FuzzSASL -fuzztime=$(FUZZTIME) ./gateway/sasl/

fuzz-long:
	$(MAKE) fuzz FUZZTIME=5m

# BACKEND=iggy runs only the Iggy backend section (against the Iggy test
# double); BENCH_SECTIONS picks sections otherwise (see scripts/bench.sh).
BACKEND ?=
bench: build
ifeq ($(BACKEND),iggy)
	BENCH_SECTIONS=iggy ./scripts/bench.sh
else
	./scripts/bench.sh
endif

# Every benchmark shortened, in make test: each section and target of make
# bench (the Iggy section too) and each target and client of make
# failover-bench, on loads small enough for a minute or two each, so that the
# scripts, kgate-bench and the comparison servers keep working end to end.
# Its figures mean nothing.
# The gateway's request-level rules (the tests that run on groupTargets)
# against a fresh Apache Kafka broker as well as kgate: the codes they
# expect are Kafka's own (scripts/kafka-rules.sh).
kafka-rules:
	GO='$(GO)' ./scripts/kafka-rules.sh

bench-short: build
	BENCH_KILLS=2 BENCH_CLUSTER_RECORDS=20000 BENCH_JOINSTORM_ARGS='-members 50' \
		BENCH_GROUPS_ARGS='-members 200 -groups 20 -settle 1s -window 5s' \
		BENCH_TXN_RECORDS=2000 BENCH_TXN_ARGS='-warmup 0' BENCH_LAT_RECORDS=500 \
		./scripts/bench.sh -partitions 1,8 -records 20000
	BENCH_SECTIONS=iggy BENCH_IGGY_RECORDS=20000 ./scripts/bench.sh
	FAILOVER_KILLS=2 FAILOVER_KAFKA_KILLS=1 FAILOVER_PAUSES=3s FAILOVER_PAUSE_ROUNDS=1 \
		FAILOVER_PAUSE_CLIENTS=franz-go ./scripts/failover-bench.sh

# Leader kills under live consumer groups (franz-go, Java, librdkafka)
# against three kgate nodes and a three-broker Apache Kafka, and with
# FAILOVER_PAUSES leader pauses; see scripts/failover-bench.sh
# (FAILOVER_KILLS, FAILOVER_KAFKA_KILLS, FAILOVER_PAUSES, ...).
failover-bench: build
	./scripts/failover-bench.sh

# The fault campaign (test/chaos, docs/chaos.md): CHAOS_NODES (3 or 5) nodes
# under load, CHAOS_FAULTS kills, pauses and partitions from the seed
# CHAOS_SEED (0: a new one, printed), optionally only the kinds in CHAOS_KINDS
# (comma-separated), then the history checker. CHAOS_CLIENTS names the group
# members' clients, one a member (franz-go, java, librdkafka; empty: three
# franz-go; java and librdkafka need ./scripts/install-test-deps.sh).
# chaos-short (in make test) applies each kind once to three nodes, then
# once to five, and checks that clients of a cut-off leader go on through
# the others (TestCutOffLeaderClients). CHAOS_STORAGE: how the nodes keep
# partitions, copy, raft-log or mixed (the default: node ids 1 and 2 modulo
# 3 raft-log, copying batches out of kept Raft log files past 1 MiB; the
# others copy); empty: KGATE_PARTITION_STORAGE or kgate's default.
CHAOS_FAULTS  ?= 100
CHAOS_SEED    ?= 0
CHAOS_KINDS   ?=
CHAOS_NODES   ?= 3
CHAOS_CLIENTS ?=
CHAOS_STORAGE ?= mixed
chaos: build
	$(GO) test -count=1 -timeout 150m -tags chaos -run 'TestChaos$$' ./test/chaos/ -v -faults $(CHAOS_FAULTS) -seed $(CHAOS_SEED) -kinds '$(CHAOS_KINDS)' -nodes $(CHAOS_NODES) -clients '$(CHAOS_CLIENTS)' -storage '$(CHAOS_STORAGE)'

chaos-short: build
	$(GO) test -race -count=1 -timeout 15m -tags chaos -run 'TestChaos$$|TestCutOffLeaderClients$$|TestDigestsPartNamesTheFirstDifference$$' ./test/chaos/ -v -seed $(CHAOS_SEED) -clients '$(CHAOS_CLIENTS)' -storage '$(CHAOS_STORAGE)'
	$(GO) test -race -count=1 -timeout 15m -tags chaos -run 'TestChaos$$' ./test/chaos/ -v -seed $(CHAOS_SEED) -nodes 5 -clients '$(CHAOS_CLIENTS)' -storage '$(CHAOS_STORAGE)'

# The Raft layer's own campaign (docs/chaos.md, "In one process"): three
# in-process nodes that snapshot and compact all the time take NEMESIS_STEPS
# crashes, cuts, freezes and leader pauses from NEMESIS_SEED (0: a new one,
# printed) under idempotent writers; every node must end with the same bytes
# and every acknowledged batch once, at its offset. make test runs 24 faults
# of it with the cluster package.
# NEMESIS_STORAGE: how the nodes keep partitions, copy, raft-log or mixed
# (nodes 1 and 2 raft-log, node 3 copy; the default).
NEMESIS_STEPS ?= 1000
NEMESIS_SEED  ?= 0
NEMESIS_STORAGE ?= mixed
chaos-raft:
	$(GO) test -count=1 -timeout 150m -run 'TestRandomFaultsKeepReplicasIdentical$$' ./cluster/ -v -nemesis-steps $(NEMESIS_STEPS) -nemesis-seed $(NEMESIS_SEED) -nemesis-storage $(NEMESIS_STORAGE)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags chaos ./test/chaos/

clean:
	rm -rf bin kgate-data
