#!/bin/sh
# Installs the Debian packages clawmem builds against, only those missing.
# Run by the make targets that need them; safe to run again (a no-op then).
# Usage: scripts/install-deps.sh [--fuzz|--eval]   (--fuzz also wants clang,
# --eval gnuplot for the plots of make eval)
set -eu
pkgs="libsqlite3-dev libcurl4-openssl-dev libjansson-dev libssl-dev pkg-config make gcc"
[ "${1:-}" = "--fuzz" ] && pkgs="$pkgs clang"
[ "${1:-}" = "--eval" ] && pkgs="$pkgs gnuplot-nox"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq $missing >/dev/null
