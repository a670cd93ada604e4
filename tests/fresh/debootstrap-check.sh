#!/usr/bin/env bash
# debootstrap-check.sh — the fresh-machine acceptance check: build a new Debian 12 (bookworm) minbase chroot,
# add a user with sudo, git-clone one revision of hoff there as that user and run the README's command
# (./quickstart test) exactly as a new user would; print its pass/fail/skip line.  Not run by make check: it
# needs root, the network (a Debian mirror, and PyPI for the PyTorch 2.x test environment: about 7 GB installed, see
# python/requirements-torch2.txt) and about 50 minutes on 2 cores.  One run at a time per --root.
#
# usage: tests/fresh/debootstrap-check.sh [options] [REV | DIR]
#   REV   a commit or branch of the repository this script is in (default: HEAD)
#   DIR   a git checkout: its HEAD (committed state only; uncommitted changes are not copied)
# options:
#   --root DIR         where the chroot is made (default /work/chroot-bookworm); it is deleted and made
#                      again on every run, so nothing of an earlier run is left in it
#   --mirror URL       Debian mirror (default: the first .../debian URI in /etc/apt/sources.list*, else
#                      http://deb.debian.org/debian)
#   --base-cache FILE  tarball of the bare debootstrap result, made on the first run and unpacked on later
#                      ones instead of running debootstrap again (default: ROOT.base.tar; "" = none)
#   --apt-cache DIR    keep the downloaded .deb files here across runs (default: ROOT.apt-cache; "" = none);
#                      only downloads are kept, every package is installed afresh
#   --command CMD      run CMD in the checkout instead of ./quickstart test
#   --remove           delete the chroot at the end (default: keep it for inspection)
# The log of the run is ROOT/home/newuser/quickstart.log (and, with --remove, ROOT.quickstart.log).
# Exit status: that of the command (0 = passed), 2 for bad usage, 1 when the chroot could not be made.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=/work/chroot-bookworm
mirror=
base_cache=unset
apt_cache=unset
command='./quickstart test'
remove=0
user=newuser

say() { printf 'debootstrap-check: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '/^# usage:/,/^# Exit status/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
    case "$1" in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
    --base-cache) base_cache=${2?--base-cache needs a file or ""}; shift 2 ;;
    --apt-cache) apt_cache=${2?--apt-cache needs a directory or ""}; shift 2 ;;
    --command) command=${2:?--command needs a command}; shift 2 ;;
    --remove) remove=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) say "unknown option $1"; usage >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -le 1 ] || { say "one REV or DIR at most (got: $*)"; usage >&2; exit 2; }
target=${1:-HEAD}
[ "$base_cache" != unset ] || base_cache=$root.base.tar
[ "$apt_cache" != unset ] || apt_cache=$root.apt-cache

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot and mounts need it)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
case "$root" in
/ | /usr | /usr/* | /etc | /etc/* | /home | /root | /var | /var/* | "") die "refusing --root $root" ;;
esac
root=$(realpath -m "$root")

# The revision to test, as a commit id, and the repository it comes from.
if [ -d "$target" ] && git -C "$target" rev-parse --git-dir >/dev/null 2>&1; then
    src=$(cd "$target" && pwd)
    rev=HEAD
else
    src=$(git -C "$here" rev-parse --show-toplevel)
    rev=$target
fi
sha=$(git -C "$src" rev-parse --verify -q "$rev^{commit}") || die "no such revision: $rev (in $src)"
say "testing $sha from $src"

if [ -z "$mirror" ]; then
    mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\{0,1\} *$/\1/p; s/^deb  *\(http[^ ]*\/debian\)\/\{0,1\}  *bookworm .*/\1/p' \
        /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | head -n 1 || true)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
fi
say "mirror $mirror"

parent=$(dirname "$root")
mkdir -p "$parent"
free_kb=$(df -Pk "$parent" | awk 'NR == 2 { print $4 }')
# The build and Debian's packages take a few GiB; build/venv-torch2 7 GiB more, and pip's cache of its wheels 3.5.
[ "$free_kb" -ge $((24 * 1024 * 1024)) ] || die "less than 24 GiB free under $parent ($((free_kb / 1024)) MiB)"

mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || say "could not unmount ${mounted[$i]}"
    done
    mounted=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mnt() { # mnt TARGET MOUNT-ARGS...: mount and remember it for cleanup
    local t=$1
    shift
    mkdir -p "$t"
    mount "$@" "$t"
    mounted+=("$t")
}

# A leftover from an interrupted run may still have things mounted inside the old chroot.
if [ -d "$root" ]; then
    while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done < <(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
    if awk -v r="$root/" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
        die "something is still mounted under $root; unmount it first"
    fi
    say "removing the old chroot $root"
    rm -rf --one-file-system "$root"
fi

# 1. A bare Debian 12: debootstrap, or the tarball of an earlier debootstrap.
if [ -n "$base_cache" ] && [ -s "$base_cache" ]; then
    say "unpacking the debootstrap result $base_cache"
    mkdir -p "$root"
    tar -C "$root" -xpf "$base_cache"
else
    say "debootstrap --variant=minbase bookworm $root $mirror"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
        { tail -n 20 "$root.debootstrap.log" >&2; die "debootstrap failed (log: $root.debootstrap.log)"; }
    if [ -n "$base_cache" ]; then
        tar -C "$root" -cpf "$base_cache.tmp" . && mv "$base_cache.tmp" "$base_cache"
    fi
fi

# 2. What a Debian 12 install has that minbase lacks and the README takes for granted: the bookworm-updates
#    and security suites, DNS, a user with sudo, git to clone with (ca-certificates for https clones).
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
EOF
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
echo debootstrap-check >"$root/etc/hostname"
# (the chroot keeps the host's kernel hostname: sudo wants to resolve it)
printf '127.0.0.1 localhost debootstrap-check %s\n' "$(uname -n)" >"$root/etc/hosts"

mnt "$root/proc" -t proc proc
mnt "$root/sys" -t sysfs -o ro sysfs
mnt "$root/dev" --bind /dev
mount --make-rslave "$root/dev"
mnt "$root/dev/pts" -t devpts -o newinstance,ptmxmode=0666 devpts
mnt "$root/dev/shm" -t tmpfs -o mode=1777 shm
mnt "$root/tmp" -t tmpfs -o mode=1777,size=8g tmp
if [ -n "$apt_cache" ]; then
    mkdir -p "$apt_cache"
    mnt "$root/var/cache/apt/archives" --bind "$apt_cache"
fi

in_root() { chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
say "apt-get install sudo git ca-certificates; user $user (sudo without password)"
in_root apt-get update -q >/dev/null
in_root apt-get install -y -q --no-install-recommends sudo git ca-certificates >/dev/null
# pip's trust in this workplace's network: a machine here reaches PyPI through a TLS proxy whose CA its pip
# configuration names (`cert` in /etc/pip.conf); the chroot gets that configuration and a copy of the bundle, as it
# gets resolv.conf.  Where the host has none, nothing changes: pip uses Debian's CA bundle.
if [ -f /etc/pip.conf ]; then
    cert=$(sed -n 's/^[[:space:]]*cert[[:space:]]*=[[:space:]]*//p' /etc/pip.conf | tail -n 1)
    if [ -n "$cert" ] && [ -f "$cert" ]; then
        cp -L "$cert" "$root/etc/pip-host-ca.pem"
        sed 's|^\([[:space:]]*cert[[:space:]]*=\).*|\1 /etc/pip-host-ca.pem|' /etc/pip.conf >"$root/etc/pip.conf"
    else
        cp -L /etc/pip.conf "$root/etc/pip.conf"
    fi
fi
in_root useradd -m -s /bin/bash "$user"
printf '%s ALL=(ALL) NOPASSWD: ALL\n' "$user" >"$root/etc/sudoers.d/$user"
chmod 0440 "$root/etc/sudoers.d/$user"

# 3. The checkout, as the user would make it: git clone, then the revision.
git clone -q --bare --no-local "$src" "$root/srv/hoff.git"
git -C "$root/srv/hoff.git" cat-file -e "$sha^{commit}" 2>/dev/null ||
    git -C "$root/srv/hoff.git" fetch -q "$src" "$sha"
in_root chown -R "$user:$user" /srv/hoff.git

# 4. README: ./quickstart test, as the user.
say "as $user: git clone; cd hoff; $command (log: $root/home/$user/quickstart.log)"
rc=0
chroot "$root" /usr/bin/env -i HOME="/home/$user" USER="$user" LOGNAME="$user" LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/bin:/usr/bin:/bin SHELL=/bin/bash \
    /usr/sbin/runuser -u "$user" -- bash -c '
        set -o pipefail
        cd && git clone -q /srv/hoff.git hoff && cd hoff && git checkout -q --detach "$1" &&
            { bash -c "$2" 2>&1 | tee "$HOME/quickstart.log"; }' bash "$sha" "$command" || rc=$?
log=$root/home/$user/quickstart.log
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" 2>/dev/null | tail -n 1 || true)
cleanup
if [ "$remove" = 1 ]; then
    cp "$log" "$root.quickstart.log" 2>/dev/null || true
    rm -rf --one-file-system "$root"
    log=$root.quickstart.log
fi
say "revision $sha: exit $rc; ${summary:-no pass/fail line}; log $log"
exit "$rc"
