#!/bin/sh
# install-ldconfig.sh DESTDIR LIBDIR — the last step of `make install`: makes
# the installed libclawmem.so.0 findable by programs linked against it.
# LIBDIR one of the loader's directories (ldconfig's list: ld.so.conf and the
# built-in ones) and no DESTDIR: runs ldconfig, so the loader's cache knows
# the new library. Otherwise it says what a program needs instead (an rpath,
# or LD_LIBRARY_PATH). $LDCONFIG names the ldconfig to use (tests fake it).
destdir=$1
libdir=$2
ldconfig=${LDCONFIG:-ldconfig}
command -v "$ldconfig" >/dev/null 2>&1 || ldconfig=/sbin/ldconfig

canon() { (cd "$1" 2>/dev/null && pwd -P) || printf '%s\n' "$1"; }

want=$(canon "$libdir")
listed=no
# `ldconfig -v -N -X` (no cache written, no links made) prints one
# "dir: (from …)" line per directory it searches, then indented libraries.
for d in $("$ldconfig" -v -N -X 2>/dev/null | sed -n 's|^\(/[^:	]*\):.*|\1|p'); do
    [ "$(canon "$d")" = "$want" ] && listed=yes
done

if [ $listed = yes ] && [ -z "$destdir" ]; then
    if "$ldconfig"; then
        echo "ldconfig: $libdir is in the loader's cache"
    else
        echo "make install: warning: ldconfig failed: run it as root before starting a program linked with -lclawmem" >&2
    fi
elif [ $listed = yes ]; then
    echo "make install: note: staged in DESTDIR: run ldconfig once the files are in $libdir"
else
    echo "make install: note: $libdir is not a directory the loader searches: link programs" \
         "with -Wl,-rpath,$libdir (\$(pkg-config --variable=libdir clawmem)) or run them with" \
         "LD_LIBRARY_PATH=$libdir"
fi
exit 0
