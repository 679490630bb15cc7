#!/usr/bin/env bash
# systemd-test.sh: run the Debian packages under Debian 12's own systemd 252
# as PID 1, with no container runtime, and check what a production host
# relies on: "systemctl start" returns once jobs run (Type=notify), reloads
# of a good and of a broken configuration, the watchdog, an exec-handler job
# under the units' hardening, a second deployment (delayqd@NAME), an
# upgrade with the service running throughout, and the purge.  Each step
# prints its time.
#
# How: a minimal Debian 12 tree (debootstrap --variant=minbase, cached in
# SYSTEMD_TEST_CACHE, /var/cache/delayq-systemd-test by default, keyed by
# its package list) is copied, then booted in private PID, mount, UTS, IPC,
# network and cgroup namespaces: the tree is bind-mounted on itself, gets a
# fresh /proc and a read-only sysfs, /dev bound in, and becomes the root by
# pivot_root (a chroot is not enough: systemd then fails ProtectSystem= and
# PrivateTmp= units with 226/NAMESPACE); then /lib/systemd/systemd is
# exec'd.  The test talks to it with nsenter.  Its own network namespace
# (loopback only) keeps its Redis on 6379 apart from the host's; its own
# cgroup keeps its systemd's cgroups under one directory, removed at the
# end.
#
# Run as root, after tests/package-test.sh has built the packages:
#
#   tests/package-test.sh            # with PACKAGE_TEST_DEBS=DIR
#   SYSTEMD_TEST_DEBS=DIR tests/systemd-test.sh
#
# Without SYSTEMD_TEST_DEBS it runs tests/package-test.sh first to build
# them.  SYSTEMD_TEST_MIRROR overrides debootstrap's default mirror.
# Exits 0 when every check passes, 1 with a line saying what is wrong, and
# 77 (skipped) with one line saying why when this machine cannot run it (not
# root, no namespaces, no debootstrap or no mirror to run it against).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
SKIP=77
cache=${SYSTEMD_TEST_CACHE:-/var/cache/delayq-systemd-test}
debs=${SYSTEMD_TEST_DEBS:-}
# The packages of the cached tree: systemd, and what the delayq packages
# and the test need inside (dpkg -i runs there without a network).
include=(systemd systemd-sysv dbus redis-server adduser procps libhiredis0.14 libevent-2.1-7
    libevent-openssl-2.1-7 libssl3 libconfig9 libpq5)
cgroup_name=delayq-systemd-test.$$
work=
own_debs=
unshare_pid=
init=
state=
t_start=$(date +%s%N)

say() { echo "systemd-test: $*"; }
skip() {
    echo "systemd-test: SKIP: $*"
    exit "$SKIP"
}
fail() {
    echo "systemd-test: FAIL: $*" >&2
    if [ -n "$init" ] && [ -d "/proc/$init" ]; then
        echo "---- journal of delayqd (last 40 lines) ----" >&2
        in_ns journalctl --no-pager -n 40 -u 'delayqd*' >&2 || true
    fi
    exit 1
}

# Milliseconds since the epoch.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Runs a command in the booted system's namespaces, at most 120 s.
in_ns() {
    timeout 120 nsenter -t "$init" -m -p -u -i -n -- "$@"
}

# Runs a shell command line in the booted system.
in_sh() { in_ns /bin/sh -c "$1"; }

# Waits until "$@" succeeds, every 0.2 s, at most $1 seconds; fails naming
# $2 when it never does.
wait_until() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$(( $(now_ms) + limit * 1000 ))
    until "$@" >/dev/null 2>&1; do
        [ "$(now_ms)" -lt "$deadline" ] || fail "after ${limit}s, still not: $what"
        sleep 0.2
    done
}

# Runs one step (a function) and prints how long it took.
step() {
    local name=$1 t0 ms
    shift
    t0=$(now_ms)
    "$@"
    ms=$(( $(now_ms) - t0 ))
    printf 'systemd-test: %-52s %3d.%03d s\n' "$name" $(( ms / 1000 )) $(( ms % 1000 ))
}

# Kills the namespace's PID 1 (and so everything in it: the mounts go with
# the namespace), removes the cgroups its systemd made, then the work
# directory.  Runs on every exit.
cleanup() {
    local rc=$? h
    if [ -n "$init" ] && [ -d "/proc/$init" ]; then
        kill -KILL "$init" 2>/dev/null || true
    fi
    if [ -n "$unshare_pid" ]; then
        # --kill-child: unshare's death kills the namespace's PID 1 too.
        kill -KILL "$unshare_pid" 2>/dev/null || true
        wait "$unshare_pid" 2>/dev/null || true
    fi
    # The namespace's processes die asynchronously: a cgroup can be removed
    # once they are gone.  At most 10 s.
    for _ in {1..50}; do
        for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
            if [ -d "$h$cgroup_name" ]; then
                find "$h$cgroup_name" -depth -type d -exec rmdir {} + 2>/dev/null || true
            fi
        done
        if ! ls -d /sys/fs/cgroup/*/"$cgroup_name" /sys/fs/cgroup/"$cgroup_name" >/dev/null 2>&1 \
            && { [ -z "$init" ] || [ ! -d "/proc/$init" ]; }; then
            break
        fi
        sleep 0.2
    done
    if ls -d /sys/fs/cgroup/*/"$cgroup_name" /sys/fs/cgroup/"$cgroup_name" >/dev/null 2>&1; then
        echo "systemd-test: could not remove the cgroups /sys/fs/cgroup/*/$cgroup_name" >&2
    fi
    if [ -n "$own_debs" ]; then
        rm -rf "$own_debs"
    fi
    if [ -n "$work" ]; then
        if [ -n "$init" ] && [ -d "/proc/$init" ]; then
            echo "systemd-test: the namespace's PID 1 ($init) is still alive: kept $work" >&2
        else
            rm -rf "$work"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- can this machine run it? -------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (namespaces, mounts, dpkg)"
for tool in debootstrap unshare nsenter pivot_root zstd timeout; do
    command -v "$tool" >/dev/null || skip "$tool not found (apt-get install debootstrap zstd)"
done
unshare --pid --mount --uts --ipc --net --cgroup --fork true 2>/dev/null \
    || skip "cannot create PID, mount, UTS, IPC, network and cgroup namespaces here"
[ -d /sys/fs/cgroup ] || skip "no cgroup file system at /sys/fs/cgroup"
if [ -z "$debs" ]; then
    debs=$(mktemp -d /tmp/delayq-systemd-debs.XXXXXX)
    own_debs=$debs
    say "no SYSTEMD_TEST_DEBS: building the packages with tests/package-test.sh"
    PACKAGE_TEST_DEBS=$debs "$top/tests/package-test.sh" || fail "tests/package-test.sh failed"
fi
ls "$debs"/old/delayq_*.deb "$debs"/new/delayq_*.deb >/dev/null 2>&1 \
    || fail "no packages in $debs/old and $debs/new (tests/package-test.sh with PACKAGE_TEST_DEBS)"
old_version=$(dpkg-deb -f "$(ls "$debs"/old/delayq_*.deb)" Version)
new_version=$(dpkg-deb -f "$(ls "$debs"/new/delayq_*.deb)" Version)

work=$(mktemp -d /tmp/delayq-systemd-test.XXXXXX)
root=$work/root

# ---- the Debian 12 tree ---------------------------------------------------------
# Made once per package list by debootstrap, kept as a tarball; each run
# unpacks a fresh copy, so no run sees what the last one left.
rootfs_tree() {
    local key tarball stage
    key=$(echo "bookworm minbase ${include[*]}" | sha256sum | cut -c1-16)
    tarball=$cache/rootfs-$key.tar.zst
    mkdir -p "$cache"
    exec 9>"$cache/lock"
    flock -w 600 9 || fail "another run holds $cache/lock for more than 600 s"
    if [ ! -f "$tarball" ]; then
        say "no cached tree: debootstrap bookworm (once; about a minute)"
        stage=$cache/stage.$$
        rm -rf "$stage"
        # shellcheck disable=SC2086 # an unset mirror is no argument
        if ! timeout 900 debootstrap --variant=minbase --include="$(IFS=,; echo "${include[*]}")" \
            bookworm "$stage" ${SYSTEMD_TEST_MIRROR:-} >"$work/debootstrap.log" 2>&1; then
            rm -rf "$stage"
            skip "debootstrap failed (no Debian mirror reachable?): $(tail -n 1 "$work/debootstrap.log")"
        fi
        tar -C "$stage" -I 'zstd -T0 -3' -cf "$tarball.tmp" . || fail "cannot write $tarball"
        mv "$tarball.tmp" "$tarball"
        rm -rf "$stage"
        # Trees of other package lists are of no more use.
        find "$cache" -maxdepth 1 -name 'rootfs-*.tar.zst' ! -path "$tarball" -delete
    fi
    exec 9>&-
    mkdir "$root"
    tar -C "$root" -I zstd -xf "$tarball" || fail "cannot unpack $tarball"
}

# What the booted system must not do to the host, or does not need: a
# getty on the host's console, the host's sysctls, kernel modules.
tune_tree() {
    local u
    echo delayq-systemd-test >"$root/etc/hostname"
    for u in console-getty.service getty@tty1.service serial-getty@.service getty.target \
        systemd-sysctl.service systemd-modules-load.service systemd-binfmt.service \
        proc-sys-fs-binfmt_misc.automount sys-kernel-config.mount sys-kernel-debug.mount \
        sys-kernel-tracing.mount sys-fs-fuse-connections.mount; do
        ln -sf /dev/null "$root/etc/systemd/system/$u"
    done
    mkdir -p "$root/root/debs/old" "$root/root/debs/new"
    if ! cp "$debs"/old/*.deb "$root/root/debs/old/" || ! cp "$debs"/new/*.deb "$root/root/debs/new/"; then
        fail "cannot copy the packages from $debs into the tree"
    fi
}

# The namespace's PID 1, before it becomes systemd: run by unshare, given
# the tree.  Mount propagation is made private first, so nothing mounted
# here shows on the host.
boot_script() {
    cat <<'EOF'
set -e
root=$1
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --bind "$root/proc/sys" "$root/proc/sys"
mount -o remount,bind,ro "$root/proc/sys"
mount -t sysfs -o ro sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mkdir -p "$root/.oldroot"
cd "$root"
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot
export container=delayq-systemd-test
exec /lib/systemd/systemd
EOF
}

# True once unshare has forked the namespace's PID 1; sets init to its
# host pid.  (A /proc file's size is 0: read it, no test -s.)  Until the
# subshell that becomes unshare has exec'd it, its children are its own
# (mkdir): a child counts only once it is in a PID namespace of its own.
ns_init_known() {
    local own
    init=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null) || init=
    init=${init%% *}
    [ -n "$init" ] || return 1
    own=$(readlink /proc/self/ns/pid)
    if [ "$(readlink "/proc/$init/ns/pid" 2>/dev/null)" = "$own" ] \
        || [ -z "$(readlink "/proc/$init/ns/pid" 2>/dev/null)" ]; then
        init=
        return 1
    fi
}

# True once the booted systemd has finished starting up; sets state.
system_up() {
    state=$(in_ns systemctl is-system-running 2>/dev/null) || true
    [ "$state" = running ] || [ "$state" = degraded ]
}

boot() {
    local h
    boot_script >"$work/boot.sh"
    (
        # A cgroup of our own in every hierarchy (cpuset needs settings
        # first and is left alone): the cgroup namespace makes it the
        # booted systemd's root.
        for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
            [ -e "${h}cgroup.procs" ] || continue
            case $h in */cpuset/) continue ;; esac
            mkdir -p "$h$cgroup_name"
            echo "$BASHPID" >"$h$cgroup_name/cgroup.procs"
        done
        exec unshare --pid --mount --uts --ipc --net --cgroup --fork --kill-child \
            /bin/bash "$work/boot.sh" "$root"
    ) >"$work/boot.log" 2>&1 &
    unshare_pid=$!
    wait_until 10 "unshare started the namespace's PID 1" ns_init_known
    wait_until 60 "systemd booted (is-system-running: running or degraded)" system_up
    [ "$state" = running ] \
        || fail "systemd booted $state: $(in_ns systemctl --failed --no-legend --plain | tr '\n' ' ')"
    [ "$(in_ns readlink /proc/1/exe)" = /usr/lib/systemd/systemd ] \
        || fail "PID 1 in the namespace is not systemd"
    wait_until 30 "redis-server.service active" in_ns systemctl is-active --quiet redis-server
    say "booted $(in_ns systemctl --version | head -n 1) as PID 1 (host pid $init)"
}

# ---- the checks -------------------------------------------------------------------
conf=/etc/delayq/delayqd.conf
done_key=systemd-test:done

install_old() {
    in_sh "DEBIAN_FRONTEND=noninteractive dpkg -i /root/debs/old/*.deb" >"$work/install.log" 2>&1 \
        || { cat "$work/install.log" >&2; fail "dpkg -i of $old_version failed"; }
    in_ns systemctl is-enabled --quiet delayqd || fail "delayqd.service is not enabled"
    if in_ns systemctl is-active --quiet delayqd; then
        fail "delayqd.service was started by the install (the shipped configuration is an example)"
    fi
}

# The configuration of the test, written over the shipped one as an admin
# would (dpkg keeps it on upgrade).  Jobs of type "probe" run the exec
# handler; the program records each job's payload and the time it ran in
# the Redis list $done_key.  $1: extra queues, $2: anything appended.
write_conf() {
    cat >"$root$conf" <<EOF
redis = { host = "127.0.0.1"; port = 6379; prefix = "st"; };
shutdown_timeout = "10s";
queues = ( { name = "st"; workers = 2; }$1 );
handlers = (
  { type = "probe"; file = "exec.so"; timeout = "10s";
    settings = { argv = [ "/usr/local/bin/delayq-probe" ]; }; },
  { type = "*"; file = "log.so"; }
);
$2
EOF
}

write_probe() {
    cat >"$root/usr/local/bin/delayq-probe" <<EOF
#!/bin/sh
# Records a job: its payload and when it ran, or, for the payload
# "hardening", what the units' sandbox allows.
label=\$(cat)
if [ "\$label" = hardening ]; then
    etc=no; touch /etc/delayq-probe 2>/dev/null && etc=yes
    tmp=no; [ -e /tmp/host-marker ] && tmp=yes
    label="hardening user=\$(id -un) nnp=\$(awk '/^NoNewPrivs/{print \$2}' /proc/self/status)"
    label="\$label capeff=\$(awk '/^CapEff/{print \$2}' /proc/self/status) etc_writable=\$etc"
    label="\$label host_tmp_visible=\$tmp"
fi
exec redis-cli -h 127.0.0.1 RPUSH $done_key "\$label done=\$(date +%s%N)" >/dev/null
EOF
    chmod 0755 "$root/usr/local/bin/delayq-probe"
    touch "$root/tmp/host-marker"
}

# Enqueues a probe job with payload $2 on queue $1 of the deployment whose
# key prefix is $3 (default: the main one's, st).  Not with -c: the
# configuration may be the broken one.
enqueue() {
    in_ns delayq -H 127.0.0.1 -p 6379 --prefix "${3:-st}" add -q "$1" -t probe "$2" >/dev/null \
        || fail "delayq add -q $1 failed"
}

# True when a job with payload $1 has run.
job_ran() {
    in_ns redis-cli -h 127.0.0.1 --raw LRANGE "$done_key" 0 -1 | grep -q "^$1 done="
}

# Enqueues a job on queue $1 and waits at most 15 s for it to run.
job_runs() {
    local label="$2-$RANDOM$RANDOM"
    enqueue "$1" "$label" "${3:-}"
    wait_until 15 "job $label on queue $1 ran" job_ran "$label"
}

main_pid() { in_ns systemctl show -P MainPID "${1:-delayqd}"; }
active() { in_ns systemctl is-active --quiet "${1:-delayqd}"; }

start_service() {
    write_conf "" ""
    write_probe
    in_ns systemctl start delayqd || fail "systemctl start delayqd failed"
    # Type=notify: "start" returns once systemd has READY=1, which delayqd
    # sends once every worker claims; so a job enqueued now just runs.
    [ "$(in_ns systemctl show -P ActiveState delayqd)" = active ] \
        || fail "delayqd is not active once systemctl start returned"
    [ "$(in_ns systemctl show -P Type delayqd)" = notify ] || fail "delayqd.service is not Type=notify"
    in_ns journalctl --no-pager -u delayqd | grep -q 'ready: every worker is connected and claiming' \
        || fail "the journal has no 'ready' line from delayqd"
    job_runs st start
}

hardening_ran() {
    in_ns redis-cli -h 127.0.0.1 --raw LRANGE "$done_key" 0 -1 | grep -q '^hardening '
}

exec_hardening() {
    local line
    enqueue st hardening
    wait_until 15 "the hardening probe job ran" hardening_ran
    line=$(in_ns redis-cli -h 127.0.0.1 --raw LRANGE "$done_key" 0 -1 | grep '^hardening ')
    for want in user=delayq nnp=1 capeff=0000000000000000 etc_writable=no host_tmp_visible=no; do
        [[ " $line " == *" $want "* ]] || fail "exec handler's program: expected $want, got: $line"
    done
    say "exec handler's program ran as: ${line% done=*}"
}

reload_good() {
    local pid
    pid=$(main_pid)
    write_conf ', { name = "st2"; workers = 1; }' ""
    in_ns systemctl reload delayqd || fail "systemctl reload with a good configuration failed"
    active || fail "delayqd not active after a good reload"
    [ "$(main_pid)" = "$pid" ] || fail "a reload changed the MainPID"
    job_runs st2 reload-new-queue
}

reload_broken() {
    local pid
    pid=$(main_pid)
    write_conf ', { name = "st2"; workers = 1; }' 'queues = ( { name = ; } );'
    if in_ns systemctl reload delayqd 2>"$work/reload.err"; then
        fail "systemctl reload accepted a broken configuration"
    fi
    active || fail "delayqd not active after a refused reload"
    [ "$(main_pid)" = "$pid" ] || fail "a refused reload changed the MainPID"
    job_runs st2 after-refused-reload
    say "refused reload said: $(grep -m1 -o 'delayqd.conf:[0-9]*.*' "$work/reload.err" \
        || in_ns journalctl --no-pager -n 5 -u delayqd | grep -m1 -o 'delayqd.conf:[0-9]*.*' || echo '?')"
    write_conf ', { name = "st2"; workers = 1; }' ""
}

# A short watchdog in a drop-in, as an admin would add one; the unit's
# WatchdogSec=30s and RestartSec=5s would make this step take over 30 s.
# (On a timeout systemd sends SIGABRT, then SIGCONT, so even a stopped
# supervisor dies of the SIGABRT; TimeoutAbortSec only bounds a daemon that
# would catch it.)
watchdog_dropin() {
    mkdir -p "$root/etc/systemd/system/delayqd.service.d"
    printf '[Service]\nWatchdogSec=2s\nTimeoutAbortSec=2s\nRestartSec=1s\n' \
        >"$root/etc/systemd/system/delayqd.service.d/test-watchdog.conf"
    in_ns systemctl daemon-reload
    in_ns systemctl restart delayqd || fail "restart with the watchdog drop-in failed"
    job_runs st watchdog-dropin
}

# True when delayqd is active with a MainPID other than $1.
restarted() {
    local p
    p=$(main_pid)
    [ "$p" != 0 ] && [ "$p" != "$1" ] && active
}

watchdog_kill() {
    local pid restarts
    pid=$(main_pid)
    restarts=$(in_ns systemctl show -P NRestarts delayqd)
    in_sh "kill -STOP $pid"
    wait_until 30 "the watchdog restarted the stopped supervisor" restarted "$pid"
    [ "$(in_ns systemctl show -P NRestarts delayqd)" -gt "$restarts" ] \
        || fail "NRestarts did not grow"
    in_ns journalctl --no-pager -u delayqd -o cat >"$work/watchdog.journal"
    grep -q 'Watchdog timeout' "$work/watchdog.journal" \
        || fail "the journal has no 'Watchdog timeout' for delayqd"
    say "systemd said: $(grep -E 'Watchdog timeout|Main process exited|Scheduled restart' \
        "$work/watchdog.journal" | tail -n 3 | sed 's/^delayqd.service: //' | tr '\n' '|')"
    in_sh "[ ! -d /proc/$pid ]" || fail "the stopped supervisor $pid still exists"
    job_runs st after-watchdog
}

watchdog_restore() {
    rm -f "$root/etc/systemd/system/delayqd.service.d/test-watchdog.conf"
    in_ns systemctl daemon-reload
    in_ns systemctl restart delayqd || fail "restart without the drop-in failed"
}

instance() {
    cat >"$root/etc/delayq/second.conf" <<EOF
redis = { host = "127.0.0.1"; port = 6379; prefix = "st-second"; };
queues = ( { name = "second"; workers = 1; } );
handlers = (
  { type = "probe"; file = "exec.so"; timeout = "10s";
    settings = { argv = [ "/usr/local/bin/delayq-probe" ]; }; }
);
EOF
    in_sh "chown root:delayq /etc/delayq/second.conf && chmod 0640 /etc/delayq/second.conf"
    in_ns systemctl start delayqd@second || fail "systemctl start delayqd@second failed"
    active delayqd@second || fail "delayqd@second is not active"
    active || fail "delayqd stopped when delayqd@second started"
    job_runs second second st-second
}

# True once at least $1 of the jobs enqueued during the upgrade have run.
upgrade_jobs_ran() {
    [ "$(in_ns redis-cli -h 127.0.0.1 --raw LRANGE "$done_key" 0 -1 | grep -c '^up-')" -ge "$1" ]
}

# The upgrade, with both services running and jobs enqueued every 100 ms
# throughout (payload: a sequence number and the enqueue time).  Asserted:
# dpkg -i succeeds; the unit's ActiveState, sampled every 200 ms, is never
# inactive or failed; both services end active with a new MainPID (the new
# binary runs); every job enqueued during the upgrade runs exactly once;
# the longest a job waited (enqueue to run) is at most 10 s.
upgrade() {
    local pid pid2 n ran dups worst state_log producer sampler t0 t1
    pid=$(main_pid)
    pid2=$(main_pid delayqd@second)
    state_log=$work/states
    : >"$state_log"
    in_sh "rm -f /run/upgrade-producer.stop"
    # shellcheck disable=SC2016 # expanded by the shell inside
    in_sh 'i=0; while [ ! -e /run/upgrade-producer.stop ] && [ $i -lt 3000 ]; do
               delayq -H 127.0.0.1 -p 6379 --prefix st add -q st -t probe "up-$i enq=$(date +%s%N)" >/dev/null || exit 1
               i=$((i + 1)); sleep 0.1
           done; echo $i >/run/upgrade-producer.count' &
    producer=$!
    (
        while :; do
            in_ns systemctl show -P ActiveState delayqd >>"$state_log" 2>/dev/null || true
            sleep 0.2
        done
    ) &
    sampler=$!
    sleep 1
    t0=$(now_ms)
    in_sh "DEBIAN_FRONTEND=noninteractive dpkg -i --force-confdef --force-confold /root/debs/new/*.deb" \
        >"$work/upgrade.log" 2>&1 \
        || { kill "$sampler" 2>/dev/null; cat "$work/upgrade.log" >&2; fail "dpkg -i of $new_version failed"; }
    t1=$(now_ms)
    say "dpkg -i of $new_version took $(( t1 - t0 )) ms"
    sleep 2
    in_sh "touch /run/upgrade-producer.stop"
    wait "$producer" || fail "the producer failed to enqueue during the upgrade"
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    n=$(in_ns cat /run/upgrade-producer.count)
    wait_until 30 "all $n jobs enqueued during the upgrade ran" upgrade_jobs_ran "$n"
    sleep 1
    in_ns redis-cli -h 127.0.0.1 --raw LRANGE "$done_key" 0 -1 | grep '^up-' >"$work/upgrade-jobs"
    ran=$(cut -d' ' -f1 "$work/upgrade-jobs" | sort -u | wc -l)
    dups=$(( $(wc -l <"$work/upgrade-jobs") - ran ))
    [ "$ran" = "$n" ] || fail "$n jobs enqueued during the upgrade, $ran ran"
    [ "$dups" = 0 ] || fail "$dups jobs enqueued during the upgrade ran twice"
    worst=$(awk '{ sub("enq=", "", $2); sub("done=", "", $3);
                   w = ($3 - $2) / 1e6; if (w > m) m = w } END { printf "%d", m }' "$work/upgrade-jobs")
    if grep -qxE 'inactive|failed' "$state_log"; then
        fail "delayqd was $(grep -xE 'inactive|failed' "$state_log" | sort -u | tr '\n' ' ')during the upgrade"
    fi
    active || fail "delayqd is not active after the upgrade"
    active delayqd@second || fail "delayqd@second is not active after the upgrade"
    [ "$(main_pid)" != "$pid" ] || fail "the upgrade did not restart delayqd (MainPID $pid)"
    [ "$(main_pid delayqd@second)" != "$pid2" ] \
        || fail "the upgrade did not restart delayqd@second (MainPID $pid2)"
    # shellcheck disable=SC2016 # a dpkg-query format
    [ "$(in_ns dpkg-query -W -f='${Version}' delayq)" = "$new_version" ] \
        || fail "delayq is not $new_version after the upgrade"
    [ "$(in_ns stat -c '%a %U:%G' "$conf")" = "640 root:delayq" ] \
        || fail "after the upgrade $conf is $(in_ns stat -c '%a %U:%G' "$conf")"
    [ "$worst" -le 10000 ] || fail "a job enqueued during the upgrade waited $worst ms (over 10 s)"
    say "upgrade: $n jobs enqueued throughout, all ran once, longest wait $worst ms;" \
        "states sampled: $(sort "$state_log" | uniq -c | awk '{printf "%s %s, ", $2, $1}')MainPID $pid -> $(main_pid)"
    job_runs second second-after-upgrade st-second
}

purge() {
    in_sh "DEBIAN_FRONTEND=noninteractive dpkg --purge delayq libdelayq-dev libdelayq6" \
        >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge failed"; }
    ! active || fail "delayqd still active after the purge"
    ! active delayqd@second || fail "delayqd@second still active after the purge"
    if in_sh "grep -lxE 'delayqd(-admin)?' /proc/[0-9]*/comm" >/dev/null 2>&1; then
        fail "delayqd processes are left after the purge"
    fi
    in_sh "[ ! -e /lib/systemd/system/delayqd.service ] && [ ! -e $conf ]" \
        || fail "the unit or $conf is left after the purge"
}

step "Debian 12 tree (cache $cache)" rootfs_tree
tune_tree
step "boot systemd as PID 1" boot
step "install $old_version (enabled, not started)" install_old
step "systemctl start delayqd (READY=1, a job runs)" start_service
step "exec-handler job under the hardening" exec_hardening
step "systemctl reload, good configuration" reload_good
step "systemctl reload, broken configuration (refused)" reload_broken
step "watchdog drop-in (WatchdogSec=2s), restart" watchdog_dropin
step "kill -STOP supervisor: watchdog kills, restarts" watchdog_kill
step "drop-in removed, restart" watchdog_restore
step "delayqd@second: a second deployment" instance
step "upgrade $old_version -> $new_version, jobs flowing" upgrade
step "purge" purge
ms=$(( ($(date +%s%N) - t_start) / 1000000 ))
say "PASS in $(( ms / 1000 )).$(( ms % 1000 / 100 )) s"
