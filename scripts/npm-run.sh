#!/bin/sh
# Runs `npm ARG...` with its standard output passed through and its standard
# error kept aside; when npm fails, prints npm's own error lines (the
# "npm ERR!" / "npm error" lines, without the log-file notice), each after
# "TAG: npm failed: ", so that a make recipe that continues past the failure
# still says why. Exits with npm's status.
# Usage: scripts/npm-run.sh TAG ARG...
set -u
tag=$1
shift
err=$(mktemp "${TMPDIR:-/tmp}/npm-err.XXXXXX") || exit 1
npm "$@" 2>"$err"
rc=$?
if [ "$rc" -ne 0 ]; then
    lines=$(sed -n 's/^npm \(ERR!\|error\) *//p' "$err" |
        grep -v -e '^$' -e 'complete log of this run' -e '/_logs/' | head -n 6)
    [ -n "$lines" ] || lines=$(grep -v '^$' "$err" | tail -n 3)
    [ -n "$lines" ] || lines="exit status $rc, no message"
    printf '%s\n' "$lines" | sed "s|^|$tag: npm failed: |" >&2
    # A registry behind a TLS-inspecting proxy needs npm's cafile; when the
    # file it names is gone, every fetch fails (SELF_SIGNED_CERT_IN_CHAIN).
    ca=$(npm config get cafile 2>/dev/null)
    case $ca in "" | null | undefined) ;; *)
        [ -r "$ca" ] || echo "$tag: npm's cafile $ca is missing: npm cannot verify the registry (restore it, e.g. update-ca-certificates, or npm config delete cafile)" >&2 ;;
    esac
fi
rm -f "$err"
exit "$rc"
