#!/bin/sh
# What an APT repository offers for some packages, read without configuring it on the host: the
# source, its signing key and its package lists live in a private directory removed on exit, and
# APT's own caches are not written. The repository's ASCII-armored signing key comes on stdin.
# Prints one `apt-cache madison` line ("name | version | source") per offered version.
# Usage: apt-offers.sh URI "SUITE..." "COMPONENT..." PACKAGE...
set -eu

uri=$1
suites=$2
components=$3
shift 3

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# APT downloads as the unprivileged _apt user, which must read the key and write the lists.
chmod 755 "$work"
cat >"$work/key.asc"
chmod 644 "$work/key.asc"
mkdir -p "$work/lists/partial"
chown -R _apt "$work/lists" 2>/dev/null || true
{
    printf 'Types: deb\nURIs: %s\nSuites: %s\n' "$uri" "$suites"
    if [ -n "$components" ]; then
        printf 'Components: %s\n' "$components"
    fi
    printf 'Signed-By: %s\n' "$work/key.asc"
} >"$work/probe.sources"

probe_options="-o Dir::Etc::SourceList=$work/probe.sources -o Dir::Etc::SourceParts=- -o Dir::State::Lists=$work/lists -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache="
# The options are meant to split into words; the paths in them hold no spaces (mktemp).
# shellcheck disable=SC2086
apt-get -q $probe_options update >&2
# shellcheck disable=SC2086
apt-cache $probe_options madison "$@"
