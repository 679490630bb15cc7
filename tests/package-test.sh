#!/usr/bin/env bash
# package-test.sh: build the Debian packages from a clean copy of this tree,
# run lintian on them, install them, check that every file is where
# docs/operations.md says and that the daemon accepts its configuration,
# upgrade them to a rebuild of a higher version (VERSION+test1, whose
# configuration file differs, as a release's may; the installed one is
# deleted first and restored by the upgrade), check the upgrade, then
# purge them and check that nothing is left.  Without systemd running, the
# service itself is not started here: tests/systemd-test.sh runs the same
# packages, upgrade included, under Debian's systemd.
#
# Run as root on Debian 12, with the build dependencies of debian/control
# (those marked <!nocheck> excepted: the packages are built with nocheck) and
# dpkg-dev, debhelper, fakeroot and lintian installed:
#
#   sudo tests/package-test.sh
#
# PACKAGE_TEST_KEEP=1 keeps the work directory and leaves the packages
# installed.  PACKAGE_TEST_DEBS=DIR copies the packages built into DIR/old
# (the changelog's version) and DIR/new (the higher one), for
# tests/systemd-test.sh.  Exits 0 when every check passes, else 1 with a line saying
# what is wrong.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
keep=${PACKAGE_TEST_KEEP:-0}
debs_out=${PACKAGE_TEST_DEBS:-}
packages=(delayq libdelayq6 libdelayq-dev python3-delayq)
installed_by_us=0
work=

say() { echo "package-test: $*"; }
# True when dpkg knows the package as installed or with its configuration left.
pkg_present() {
    local st
    st=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || st=
    [ -n "$st" ] && [ "$st" != not-installed ]
}
fail() {
    echo "package-test: FAIL: $*" >&2
    exit 1
}

cleanup() {
    local rc=$?
    if [ "$installed_by_us" = 1 ] && [ "$keep" != 1 ]; then
        say "purging the packages after a failure"
        apt-get purge -y -qq "${packages[@]}" >/dev/null 2>&1 || true
    fi
    if [ -n "$work" ] && [ "$keep" != 1 ]; then
        rm -rf "$work"
    elif [ -n "$work" ]; then
        say "kept $work"
    fi
    exit "$rc"
}
trap cleanup EXIT

# ---- preconditions ----------------------------------------------------------
[ "$(id -u)" = 0 ] || fail "run as root: it installs and purges packages"
for tool in dpkg-buildpackage dpkg-checkbuilddeps dh fakeroot apt-get; do
    command -v "$tool" >/dev/null \
        || fail "$tool not found: apt-get install dpkg-dev debhelper fakeroot"
done
for p in "${packages[@]}"; do
    if pkg_present "$p"; then
        fail "$p is already installed (or its configuration is left): purge it first," \
            "this test purges what it installs, configuration included"
    fi
done

export DEBIAN_FRONTEND=noninteractive
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
upstream=${version%-*}
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
work=$(mktemp -d /tmp/delayq-package-test.XXXXXX)
src=$work/delayq-$upstream
mkdir "$src"

# ---- a clean copy of the tree ---------------------------------------------
# In a git checkout: the tracked files and the new ones not ignored, as they
# are in the working tree (uncommitted changes included), without build
# products.  Otherwise (an unpacked release tarball, a checkout without git)
# the whole tree, then "make distclean" in the copy if it was configured.
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (
        cd "$top"
        git ls-files -z --cached --others --exclude-standard |
            while IFS= read -r -d '' f; do
                # A tracked file deleted in the working tree is not copied.
                if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
            done |
            tar --null --no-recursion -T - -cf -
    ) | tar -C "$src" -xf -
else
    cp -a "$top/." "$src/"
    if [ -e "$src/config.status" ]; then
        (cd "$src" && make -s distclean) >"$work/distclean.log" 2>&1 \
            || { cat "$work/distclean.log" >&2; fail "make distclean failed in the copy of $top"; }
    fi
fi
[ -f "$src/debian/control" ] || fail "no debian/control in the copy of $top"
say "building delayq $version from a copy of $top in $work"

# ---- build ------------------------------------------------------------------
export DEB_BUILD_OPTIONS="nocheck${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}"
export DEB_BUILD_PROFILES=nocheck
(cd "$src" && dpkg-checkbuilddeps) || fail "build dependencies missing (see above)"

# Runs dpkg-buildpackage in the copy (extra arguments passed on) and sets
# built_debs to the packages of version $1 it made in $work.
build_debs() {
    local v=$1 p deb
    shift
    if ! (cd "$src" && dpkg-buildpackage -us -uc -b -Jauto "$@") >"$work/build-$v.log" 2>&1; then
        tail -n 60 "$work/build-$v.log" >&2
        keep=1
        fail "dpkg-buildpackage of $v failed; the log is $work/build-$v.log"
    fi
    built_debs=()
    for p in "${packages[@]}"; do
        deb=$work/${p}_${v}_${arch}.deb
        [ -f "$deb" ] || deb=$work/${p}_${v}_all.deb   # python3-delayq
        [ -f "$deb" ] || fail "dpkg-buildpackage made no $(basename "$deb")"
        built_debs+=("$deb")
    done
}
build_debs "$version"
debs=("${built_debs[@]}")
for deb in "${debs[@]}"; do
    say "$(basename "$deb"): $(dpkg-deb -c "$deb" | grep -vc '/$') files"
done

# The upgrade: a higher version from the same build (-nc: the compiled
# tree is reused, only the packages are made again), with one more line in
# the configuration file, to tell which version's file is installed.
new_version=$version+test1
{
    printf 'delayq (%s) unstable; urgency=medium\n\n  * Upgrade test build.\n\n' "$new_version"
    printf ' -- %s  %s\n\n' "$(dpkg-parsechangelog -l "$src/debian/changelog" -S Maintainer)" \
        "$(date -R)"
    cat "$src/debian/changelog"
} >"$src/debian/changelog.new"
mv "$src/debian/changelog.new" "$src/debian/changelog"
printf '\n# (upgrade test build %s)\n' "$new_version" >>"$src/etc/delayqd.conf"
build_debs "$new_version" -nc
new_debs=("${built_debs[@]}")
say "built the upgrade test packages, version $new_version"
if [ -n "$debs_out" ]; then
    mkdir -p "$debs_out/old" "$debs_out/new"
    rm -f "$debs_out"/old/*.deb "$debs_out"/new/*.deb
    # Not python3-delayq: tests/systemd-test.sh installs these with dpkg -i
    # in a tree without python3-redis.
    for deb in "${debs[@]}"; do
        [[ $deb == */python3-delayq_* ]] || cp "$deb" "$debs_out/old/"
    done
    for deb in "${new_debs[@]}"; do
        [[ $deb == */python3-delayq_* ]] || cp "$deb" "$debs_out/new/"
    done
    say "copied the packages to $debs_out/old ($version) and $debs_out/new ($new_version)"
fi

# ---- lintian ----------------------------------------------------------------
if command -v lintian >/dev/null; then
    say "lintian (errors and warnings fail; docs/operations.md explains the rest)"
    lintian --fail-on error,warning --pedantic -I "$work/delayq_${version}_${arch}.changes" \
        || fail "lintian reports errors or warnings (above)"
else
    say "lintian not installed: skipping that check (apt-get install lintian)"
fi

# ---- install ----------------------------------------------------------------
installed_by_us=1
apt-get install -y -qq --no-install-recommends "${debs[@]}" >"$work/install.log" 2>&1 \
    || { cat "$work/install.log" >&2; fail "installing the packages failed"; }

# ---- where docs/operations.md says the files are ------------------------------
libdir=/usr/lib/$ma
files=(
    /usr/sbin/delayqd
    /usr/bin/delayq
    /etc/delayq/delayqd.conf
    /lib/systemd/system/delayqd.service
    /lib/systemd/system/delayqd@.service
    /usr/share/man/man1/delayq.1.gz
    /usr/share/man/man5/delayqd.conf.5.gz
    /usr/share/man/man8/delayqd.8.gz
    /usr/share/doc/delayq/operations.md.gz
    "$libdir/libdelayq.so.6"
    /usr/include/delayq/client.h
    /usr/include/delayq/handler.h
    "$libdir/libdelayq.so"
    "$libdir/pkgconfig/libdelayq.pc"
    "$libdir/pkgconfig/delayq-handler.pc"
    /usr/share/man/man3/delayq-handler.3.gz
)
for h in log exec http redis; do
    files+=("$libdir/delayq/handlers/$h.so")
done
for lua in "$top"/src/scripts/*.lua; do
    name=$(basename "$lua")
    case $name in lib.lua | lib_*.lua) ;; *) files+=("/usr/share/delayq/scripts/$name") ;; esac
done
for f in "${files[@]}"; do
    [ -e "$f" ] || fail "$f is missing"
done
for prog in /usr/sbin/delayqd /usr/bin/delayq; do
    [ -x "$prog" ] || fail "$prog is not executable"
done
leftovers=$(find "$libdir" -maxdepth 1 -name 'libdelayq*' \( -name '*.la' -o -name '*.a' \) -print;
    find "$libdir/delayq" -name '*.la' -print)
[ -z "$leftovers" ] || fail "libtool archives or a static library installed: $leftovers"
for prog in /usr/sbin/delayqd /usr/bin/delayq "$libdir"/delayq/handlers/*.so; do
    unresolved=$(ldd "$prog" | grep 'not found' || true)
    [ -z "$unresolved" ] || fail "$prog: unresolved libraries: $unresolved"
done
conffiles=$(dpkg-query -W -f='${Conffiles}\n' delayq)
[[ $conffiles == *" /etc/delayq/delayqd.conf "* ]] \
    || fail "/etc/delayq/delayqd.conf is not a conffile of delayq"
perm=$(stat -c '%a %U:%G' /etc/delayq/delayqd.conf)
[ "$perm" = "640 root:delayq" ] || fail "/etc/delayq/delayqd.conf is $perm, expected 640 root:delayq"
getent passwd delayq >/dev/null || fail "no delayq user"
getent group delayq >/dev/null || fail "no delayq group"
[ "$(id -gn delayq)" = delayq ] || fail "the delayq user's group is not delayq"
# Enabled (dh_installsystemd), not started (--no-start; cannot be seen here).
[ -L /etc/systemd/system/multi-user.target.wants/delayqd.service ] \
    || fail "delayqd.service is not enabled"
[ ! -e /etc/systemd/system/multi-user.target.wants/delayqd@.service ] \
    || fail "the template delayqd@.service was enabled"
say "files: all ${#files[@]} in place"

# ---- the programs -------------------------------------------------------------
/usr/sbin/delayqd -t -c /etc/delayq/delayqd.conf \
    || fail "delayqd -t rejects the shipped configuration (as root)"
runuser -u delayq -- /usr/sbin/delayqd -t -c /etc/delayq/delayqd.conf \
    || fail "delayqd -t rejects the shipped configuration as the delayq user"
cli_version=$(/usr/bin/delayq --version) || fail "delayq --version fails"
[[ $cli_version == *"$upstream"* ]] || fail "delayq --version says '$cli_version', not $upstream"
[ "$(pkg-config --modversion libdelayq)" = "$upstream" ] \
    || fail "pkg-config libdelayq is not version $upstream"
[ "$(pkg-config --variable=handlerdir delayq-handler)" = "$libdir/delayq/handlers" ] \
    || fail "pkg-config delayq-handler: handlerdir is not $libdir/delayq/handlers"

# libdelayq-dev: a client program and a handler, built as a user would build
# them, against the installed files only.
if command -v cc >/dev/null; then
    cat >"$work/client.c" <<'EOF'
#include <delayq/client.h>
#include <stdio.h>
int main(void)
{
    dq_options opt;
    dq_options_init(&opt);
    return puts(dq_status_str(DQ_OK)) < 0;
}
EOF
    # shellcheck disable=SC2046 # pkg-config's words are meant to split
    cc -o "$work/client" "$work/client.c" $(pkg-config --cflags --libs libdelayq) \
        || fail "cannot build a program against libdelayq"
    "$work/client" >/dev/null || fail "a program linked with libdelayq does not run"

    mkdir -m 0755 "$work/handlers"
    cat >"$work/hello.c" <<'EOF'
#include <delayq/handler.h>
#include <stddef.h>
static int hello_init(const dq_host *host, const dq_settings *s, void **state,
                      char *err, size_t errlen)
{
    (void)host; (void)s; (void)err; (void)errlen;
    *state = NULL;
    return 0;
}
static dq_handler_result hello_handle(void *state, const dq_handler_job *job,
                                      dq_handler_outcome *out)
{
    (void)state; (void)job; (void)out;
    return DQ_HANDLER_OK;
}
static void hello_fini(void *state) { (void)state; }
DQ_HANDLER_DEFINE("hello", hello_init, hello_handle, hello_fini);
EOF
    # shellcheck disable=SC2046
    cc -shared -fPIC -o "$work/handlers/hello.so" "$work/hello.c" \
        $(pkg-config --cflags delayq-handler) \
        || fail "cannot build a handler with pkg-config delayq-handler"
    cat >"$work/hello.conf" <<EOF
redis = { host = "127.0.0.1"; port = 6379; };
queues = ( { name = "packagetest"; workers = 1; } );
handlers = (
  { type = "hello"; file = "$work/handlers/hello.so"; },
  { type = "*"; file = "log.so"; }
);
EOF
    chmod 0755 "$work"
    /usr/sbin/delayqd -t -c "$work/hello.conf" \
        || fail "delayqd -t rejects a handler built against the installed header"
    say "libdelayq-dev: a client and a handler build and load"
else
    say "no C compiler: skipping the libdelayq-dev build checks"
fi

# python3-delayq: the module imports with Debian's python3-redis, carries the
# same scripts as /usr/share/delayq/scripts, and enqueues through a private
# redis-server (when one is installed).
pymod=$(/usr/bin/python3 -c 'import delayq, os; print(os.path.dirname(delayq.__file__))') \
    || fail "python3-delayq: import delayq fails"
for lua in /usr/share/delayq/scripts/*.lua; do
    cmp -s "$lua" "$pymod/scripts/$(basename "$lua")" \
        || fail "python3-delayq: $pymod/scripts/$(basename "$lua") differs from $lua"
done
if command -v redis-server >/dev/null; then
    mkdir -m 0700 "$work/redis"
    redis-server --port 0 --unixsocket "$work/redis/r.sock" --save '' --appendonly no \
        --dir "$work/redis" >"$work/redis/log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do [ -S "$work/redis/r.sock" ] && break; sleep 0.05; done
    got=$(/usr/bin/python3 - "$work/redis/r.sock" <<'EOF'
import sys
from datetime import timedelta
import delayq
with delayq.Client.from_url("unix://" + sys.argv[1]) as dq:
    dq.enqueue("orders", "order.cancel", b'{"order":1234}', delay=timedelta(minutes=30),
               id="order:1234:cancel")
    job = dq.show("orders", "order:1234:cancel")
    print(job.state, job.payload.decode(), dq.cancel("orders", "order:1234:cancel"))
EOF
    ) || { kill "$redis_pid"; fail "python3-delayq: enqueueing through it failed"; }
    kill "$redis_pid"
    wait "$redis_pid" 2>/dev/null || true
    [ "$got" = 'delayed {"order":1234} True' ] \
        || fail "python3-delayq: enqueue, show, cancel gave '$got'"
    say "python3-delayq: enqueued, shown and cancelled a job in a private redis-server"
else
    say "python3-delayq: imports, scripts identical (no redis-server to enqueue into)"
fi

# ---- the units ----------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
    say "systemd-analyze not installed: skipping the unit checks"
else
    # First a trivial unit: if even that fails, systemd-analyze cannot run
    # here (some containers), which is not the units' fault.
    printf '[Service]\nExecStart=/bin/true\n' >"$work/probe.service"
    if ! systemd-analyze verify "$work/probe.service" >/dev/null 2>&1; then
        say "systemd-analyze verify cannot run here: skipping the unit checks"
    else
        # Also checks that the man pages in Documentation= are installed.
        systemd-analyze verify /lib/systemd/system/delayqd.service \
            /lib/systemd/system/delayqd@packagetest.service \
            || fail "systemd-analyze verify rejects the units (above)"
        say "units: systemd-analyze verify accepts them"
    fi
fi

# ---- upgrade ------------------------------------------------------------------
# The maintainer scripts dh_installsystemd generated (--no-start
# --restart-after-upgrade): nothing stops the daemon before an upgrade, and
# the postinst try-restarts it (no start on a first install).
info=/var/lib/dpkg/info
if [ -f "$info/delayq.preinst" ] && grep -q 'deb-systemd-invoke stop' "$info/delayq.preinst"; then
    fail "the preinst stops the daemon before an upgrade: $(grep -n 'deb-systemd-invoke' "$info/delayq.preinst")"
fi
grep -q "deb-systemd-invoke try-restart 'delayqd.service'" "$info/delayq.postinst" \
    || fail "the postinst does not try-restart delayqd.service on upgrade"
if grep -q 'deb-systemd-invoke start' "$info/delayq.postinst"; then
    fail "the postinst starts the daemon (the shipped configuration is an example)"
fi
# dpkg keeps the mode of a conffile it replaces; one it installs anew (as
# --force-confmiss does for a deleted one) comes 0644 from the package, and
# the postinst must make it 0640 again on this upgrade too.
rm /etc/delayq/delayqd.conf
apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confdef \
    -o Dpkg::Options::=--force-confold -o Dpkg::Options::=--force-confmiss \
    "${new_debs[@]}" >"$work/upgrade.log" 2>&1 \
    || { cat "$work/upgrade.log" >&2; fail "upgrading to $new_version failed"; }
for p in "${packages[@]}"; do
    v=$(dpkg-query -W -f='${Version} ${db:Status-Status}' "$p")
    [ "$v" = "$new_version installed" ] || fail "after the upgrade, $p is '$v'"
done
grep -q "upgrade test build $new_version" /etc/delayq/delayqd.conf \
    || fail "the upgrade did not restore /etc/delayq/delayqd.conf from $new_version"
perm=$(stat -c '%a %U:%G' /etc/delayq/delayqd.conf)
[ "$perm" = "640 root:delayq" ] \
    || fail "after the upgrade, /etc/delayq/delayqd.conf is $perm, expected 640 root:delayq"
[ -L /etc/systemd/system/multi-user.target.wants/delayqd.service ] \
    || fail "delayqd.service is no longer enabled after the upgrade"
/usr/sbin/delayqd -t -c /etc/delayq/delayqd.conf \
    || fail "delayqd -t rejects the configuration after the upgrade"
say "upgrade to $new_version: installed, configuration restored and 640 root:delayq, still enabled"

# ---- purge ----------------------------------------------------------------------
if [ "$keep" = 1 ]; then
    say "PACKAGE_TEST_KEEP=1: leaving the packages installed"
    say "PASS"
    exit 0
fi
apt-get purge -y -qq "${packages[@]}" >"$work/purge.log" 2>&1 \
    || { cat "$work/purge.log" >&2; fail "purging the packages failed"; }
installed_by_us=0
for p in "${packages[@]}"; do
    if pkg_present "$p"; then
        fail "$p is still known to dpkg after the purge"
    fi
done
for f in "${files[@]}" /etc/delayq /usr/share/delayq "$libdir/delayq" /usr/include/delayq "$pymod" \
    /etc/systemd/system/multi-user.target.wants/delayqd.service; do
    if [ -e "$f" ] || [ -L "$f" ]; then fail "$f is left after the purge"; fi
done
# Anything named after delayq outside /usr/local (a "make install" there is
# not ours); the user's lines in /etc/passwd and the like are files of
# other names.
leftovers=$(find /etc /usr /lib /var/lib/systemd /var/lib/dpkg/info -path /usr/local -prune \
    -o -name '*delayq*' -print 2>/dev/null || true)
[ -z "$leftovers" ] || fail "left after the purge: $leftovers"
say "purge: nothing left (the delayq system user stays, as Debian policy asks)"
say "PASS"
