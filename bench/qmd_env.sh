# qmd_env.sh — sourced by bench/peer_qmd.sh and bench/eval_qmd.sh: installs the pinned peer QMD
# (@tobilu/qmd on Bun, both from npm) into $CLAWMEM_PEER_DIR (default build/peers) on first use and
# gives an isolated, offline QMD state in a throwaway temp dir.
#   qmd_install          sets $bun, $qmd_js, $bun_version (installs when absent)
#   qmd_isolate          sets $state (a temp dir, removed at exit unless CLAWMEM_PEER_KEEP=1),
#                        exports QMD's paths into it and cd's into $state/run
#   qmd ARGS...          runs the QMD CLI
# The caller defines say() and die() and sets $here (its own directory) before sourcing.

QMD_VERSION=2.8.3 # npm @tobilu/qmd
BUN_VERSION=1.4.5 # npm bun (ships the binary in @oven/bun-<platform>)

# The install itself is scripts/install-qmd.sh (shared with the QMD backend's tests).
qmd_install_peer() {
  "$here/../scripts/install-qmd.sh" "$prefix" >/dev/null ||
    die "npm install of @tobilu/qmd@$QMD_VERSION / bun@$BUN_VERSION failed"
}

qmd_install() {
  peer_root=${CLAWMEM_PEER_DIR:-$(dirname "$here")/build/peers}
  mkdir -p "$peer_root" || die "cannot create $peer_root"
  peer_root=$(cd "$peer_root" && pwd)
  prefix=$peer_root/qmd-$QMD_VERSION-bun-$BUN_VERSION
  bun=$prefix/node_modules/.bin/bun
  # Run the CLI entry with Bun directly: the package's bin/qmd launcher picks Node whenever a
  # package-lock.json sits at the install root (as it does after npm install), and QMD needs
  # Node >= 22 plus a compiled better-sqlite3 there.
  qmd_js=$prefix/node_modules/@tobilu/qmd/dist/cli/qmd.js
  [[ -x $bun && -f $qmd_js ]] || qmd_install_peer
  bun_version=$("$bun" --version 2>/dev/null) || die "bun at $bun does not run (remove $prefix to reinstall)"
  [[ $bun_version == "$BUN_VERSION" ]] || die "bun at $bun is $bun_version, want $BUN_VERSION"
}

qmd_isolate() {
  state=$(mktemp -d "${TMPDIR:-/tmp}/peer_qmd.XXXXXX")
  if [[ ${CLAWMEM_PEER_KEEP:-0} == 1 ]]; then say "keeping state in $state"; else trap 'rm -rf "$state"' EXIT; fi
  mkdir -p "$state/home" "$state/config" "$state/cache" "$state/run"
  export HOME=$state/home
  export XDG_CONFIG_HOME=$state/config     # $XDG_CONFIG_HOME/qmd/index.yml: collections + models
  export QMD_CONFIG_DIR=$state/config/qmd  # takes precedence over XDG_CONFIG_HOME; pin it too
  export XDG_CACHE_HOME=$state/cache       # default index, model cache, Bun transpiler cache
  export INDEX_PATH=$state/index.sqlite    # the SQLite index itself (FTS5 + vector tables)
  export NO_COLOR=1
  # Offline guard: `collection add`, `update` and `search` load no model, but should anything try,
  # it meets a local path that does not exist instead of an hf: URI it would download.
  export QMD_EMBED_MODEL=$state/no-models/embed.gguf
  export QMD_GENERATE_MODEL=$state/no-models/generate.gguf
  export QMD_RERANK_MODEL=$state/no-models/rerank.gguf
  export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
  unset QMD_SOURCE_MODE QMD_LLAMA_GPU
  # QMD also honours a project-local .qmd/index.yml found by walking up from the working
  # directory, so run it from inside the temp dir.
  cd "$state/run"
}

qmd() { "$bun" "$qmd_js" "$@"; }
