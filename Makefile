.PHONY: help test test-race lint bench bench-graph bench-fileset build ci fuzz crashloop ha

help: ## show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build ./sluice
	go build -o sluice ./cmd/sluice

test: ## run the tests (the README's command)
	go test -timeout 30m ./...

test-race: ## run the tests with the race detector
	go test -race -timeout 60m ./...

lint: ## gofmt, go vet, and the duplicate-code check
	@test -z "$$(gofmt -l cmd internal action remote client examples *.go)" || (gofmt -l cmd internal action remote client examples *.go; exit 1)
	go vet ./...

bench: build ## engine and store benchmarks on this machine (./sluice-bench beside ./sluice)
	go build -o sluice-bench ./cmd/sluice-bench
	./sluice-bench engine --tasks 20000
	./sluice-bench engine --tasks 2000 --mode paced --rate 200
	go test -run XXX -bench . -benchtime 1x ./internal/store/...

bench-graph: ## sluice's graph workflow against go mod graph, 5,000 modules (SLUICE_GRAPH_BENCH_MODULES)
	go test -run '^$$' -bench GoModGraph -benchtime 1x -timeout 60m ./internal/graph

bench-fileset: ## 10,000 dataset requests through sluice fileset against local fakes (docs/fileset.md)
	go test -run XXX -bench BenchmarkFileset -benchtime 1x -timeout 30m ./internal/fileset/

fuzz: ## every fuzz target for 10 minutes (CI: 10 s); failing inputs land in testdata/fuzz
	bash .ci/fuzz 10m

CRASHLOOPS ?= 10
crashloop: ## the corpus crash loop CI runs once (50 SIGKILLs during an ingest of the whole corpus), CRASHLOOPS times with new seeds
	go test -run '^(TestCorpus|TestCorpusCrashLoop)$$' -count $(CRASHLOOPS) -timeout 300m -v ./internal/e2e

ci: ## what CI runs
	bash .ci/run

ha: ## the PostgreSQL failover tests, minutes each, required in CI (pg_auto_failover on loopback; apt-get install postgresql-15-auto-failover)
	SLUICE_TEST_REQUIRE_HA=1 go test -run '^(TestPostgresFailover|TestAsyncFailoverLostCommit|TestWorkerClockSkew)$$' -count 1 -timeout 30m -v ./internal/e2e
