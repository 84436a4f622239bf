#!/usr/bin/env bash
# Assemble a C library that nobody on this project wrote into a target repository for autoresearch:
# download the Python package's source distribution (which vendors the library's C sources) with
# pip, copy the C sources and this folder's contract files (<lib>/: a benchmark program printing
# METRIC lines, a checks script, a Makefile, .github/autoresearch.yml) into DEST, and commit.
# Only the contract files and this script live in this repository, never the library's code.
#
#   examples/clibs/setup.sh lz4 /tmp/lz4-target       # python-lz4 4.3.3 vendors lz4 in lz4libs/
#   examples/clibs/setup.sh xxhash /tmp/xxhash-target # python-xxhash 3.5.0 vendors xxHash in deps/xxhash/
set -euo pipefail
lib=${1:?usage: setup.sh lz4|xxhash DEST}
dest=${2:?usage: setup.sh lz4|xxhash DEST}
here=$(cd "$(dirname "$0")" && pwd)
pip=${PIP:-python3 -m pip}
case $lib in
  lz4) pkg=lz4; ver=4.3.3; vendored=lz4libs ;;
  xxhash) pkg=xxhash; ver=3.5.0; vendored=deps/xxhash ;;
  *) echo "unknown library $lib (lz4 or xxhash)" >&2; exit 2 ;;
esac
[ -e "$dest" ] && { echo "$dest exists; choose a new folder" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$pip download --quiet --no-binary :all: --no-deps "$pkg==$ver" -d "$tmp"
tar -xzf "$tmp/$pkg-$ver.tar.gz" -C "$tmp"
mkdir -p "$dest/$(basename "$vendored")" "$dest/.github"
cp -r "$tmp/$pkg-$ver/$vendored/." "$dest/$(basename "$vendored")/"
for f in "$here/$lib"/*; do
  case $(basename "$f") in
    autoresearch.yml) cp "$f" "$dest/.github/autoresearch.yml" ;;
    candidates) ;;   # maintainer patches to try with --candidate, not part of the target
    *) cp "$f" "$dest/" ;;
  esac
done
printf 'bench\n*.o\n' > "$dest/.gitignore"
git -C "$dest" init -q
git -C "$dest" add -A
git -C "$dest" -c user.name=autoresearch -c user.email=autoresearch@localhost \
  commit -qm "$pkg $ver's vendored $(basename "$vendored") + the autoresearch contract"
echo "$dest: $(git -C "$dest" log --oneline | head -1)"
