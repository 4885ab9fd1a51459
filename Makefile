# clawmem — plain Makefile. Targets:
#   make            build/clawmem and build/libclawmem.a
#   make demo       index the bundled example workspace and search it
#   make test       unit + end-to-end tests, fuzz corpus replay (prints "N passed, N failed")
#   make asan       the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make bench      indexing and search benchmark against QMD (see docs/BENCHMARKS.md)
#   make eval       retrieval quality on LoCoMo and SciFact, with QMD (see docs/QUALITY.md)
#   make fuzz       libFuzzer runs of every parser (FUZZ_SECONDS each, clang)
#   make format     clang-format every source file
# WERROR=1 turns warnings into errors (CI sets it).

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
SAN      ?=
PKGS     := sqlite3 jansson libcrypto
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla \
            -Wwrite-strings -Wformat=2
ifeq ($(WERROR),1)
WARN     += -Werror
endif
CFLAGS   ?= $(OPT) -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -Iinclude -MMD -MP \
             $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBS     := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lsqlite3 -ljansson -lcrypto) -lm -lpthread -ldl
# The command links Debian's static archives of its libraries: a process that
# answers one search starts in 4 ms instead of 6 (no dynamic relocation of
# libcrypto and libsqlite3).
CLI_LIBS := -Wl,-Bstatic -lsqlite3 -ljansson -lcrypto -Wl,-Bdynamic -lm -lpthread -ldl

LIB_SRC  := $(sort $(wildcard src/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(BUILD)/obj/cli/main.o $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard server/*.c))
TEST_SRC := $(sort $(wildcard tests/*.c)) $(sort $(wildcard tests/fuzz/fuzz_*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
# llama.cpp, for the "local" embedding provider: the system's (pkg-config
# llama) or the copy scripts/install-llama.sh puts in LLAMA_DIR. Only
# src/embed/local.c sees its headers; the library is dlopen()ed at run time.
LLAMA_DIR ?= build/llama
ifneq ($(shell pkg-config --exists llama 2>/dev/null && echo y),)
LLAMA_LIBDIR := $(shell pkg-config --variable=libdir llama)
LLAMA_CFLAGS := -DCM_HAVE_LLAMA $(shell pkg-config --cflags llama) \
                -DCM_LLAMA_LIB='"$(LLAMA_LIBDIR)/libllama.so"'
LLAMA_STAMP  :=
else ifneq ($(wildcard $(LLAMA_DIR)/.installed-*),)
LLAMA_LIBDIR := $(abspath $(LLAMA_DIR))/lib
LLAMA_CFLAGS := -DCM_HAVE_LLAMA -I$(LLAMA_DIR)/include -DCM_LLAMA_LIB='"$(LLAMA_LIBDIR)/libllama.v0.4.0.so"'
LLAMA_STAMP  := $(wildcard $(LLAMA_DIR)/.installed-*)
endif
# The tests' BERT model, generated from llama.cpp's BERT vocabulary.
TEST_MODEL := $(if $(LLAMA_CFLAGS),$(BUILD)/tiny-bert.gguf)
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 60

.PHONY: all deps node-deps llama demo test test-run asan bench bench-run eval fuzz format clean

all: deps $(BUILD)/clawmem $(BUILD)/libclawmem.a

deps:
	@scripts/install-deps.sh

node-deps:
	@scripts/install-node-deps.sh

llama:
	@scripts/install-llama.sh $(LLAMA_DIR)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/src/embed/local.o: ALL_CFLAGS += $(LLAMA_CFLAGS)
$(BUILD)/obj/src/embed/local.o: $(LLAMA_STAMP)

$(BUILD)/libclawmem.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/clawmem: $(CLI_OBJ) $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(CLI_LIBS)

$(BUILD)/test_runner: $(TEST_OBJ) $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/convert-static-model: $(BUILD)/obj/scripts/convert-static-model.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_search: $(BUILD)/obj/bench/bench_search.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_vector: $(BUILD)/obj/bench/bench_vector.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_local: $(BUILD)/obj/bench/bench_local.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_scale: $(BUILD)/obj/bench/bench_scale.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/bench_hybrid: $(BUILD)/obj/bench/bench_hybrid.o $(BUILD)/obj/tests/fakeserver.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/fake_embed_server: $(BUILD)/obj/bench/fake_embed_server.o $(BUILD)/obj/tests/fakeserver.o $(BUILD)/libclawmem.a
	$(CC) $(SAN) -o $@ $^ $(LIBS)

DEMO := $(BUILD)/clawmem --workspace examples/workspace --state-dir $(BUILD)/demo-state
demo: all
	$(DEMO) index
	$(DEMO) status
	$(DEMO) search "router VLAN AdGuard"
	$(DEMO) search "서울 사무실 회의"
	$(DEMO) search "検索 インデックス" --max-results 2
	$(DEMO) get MEMORY.md --from 1 --lines 12

# Installs what the tests need, then builds again so that the build sees it.
test: node-deps llama
	@$(MAKE) --no-print-directory test-run

test-run: all $(BUILD)/test_runner $(TEST_MODEL)
	CLAWMEM_BIN=$(BUILD)/clawmem CLAWMEM_TEST_GGUF=$(TEST_MODEL) $(BUILD)/test_runner $(TESTS)

$(BUILD)/make-bert-gguf: tests/tools/make_bert_gguf.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 $(WARN) $(filter -I%,$(LLAMA_CFLAGS)) -o $@ $< \
	  -L$(LLAMA_LIBDIR) -l:libggml-base.so -Wl,-rpath,$(LLAMA_LIBDIR) -lm

$(BUILD)/tiny-bert.gguf: $(BUILD)/make-bert-gguf
	$< $(LLAMA_DIR)/models/ggml-vocab-bert-bge.gguf $@ tiny

asan:
	$(MAKE) BUILD=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

bench: node-deps llama
	@$(MAKE) --no-print-directory bench-run

bench-run: all $(BUILD)/bench_search $(BUILD)/bench_vector $(BUILD)/bench_hybrid $(BUILD)/bench_scale \
           $(BUILD)/bench_local $(BUILD)/make-bert-gguf
	bench/run.sh

eval: all $(BUILD)/fake_embed_server
	bench/eval.sh $(BUILD)

fuzz: deps
	@scripts/install-deps.sh --fuzz
	@mkdir -p $(BUILD)/fuzz
	@for t in $(FUZZ_TARGETS); do \
	  clang -std=c11 -D_GNU_SOURCE -DFUZZ_MAIN -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude \
	    $$(pkg-config --cflags $(PKGS)) tests/fuzz/fuzz_$$t.c $(LIB_SRC) \
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

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
