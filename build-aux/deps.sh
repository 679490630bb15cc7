# build-aux/deps.sh: the Debian 12 packages that building delayq, its demo
# and its whole test suite need, in one place, and deps_install, which
# installs those of a list that are missing.  Sourced by ./quickstart and
# .ci/run.  (debian/control's Build-Depends must name the same packages;
# the README lists them for people who build by hand.)
# shellcheck shell=bash

# The compiler and the autotools; the three libraries; redis-server (it
# brings redis-cli) for the demo's and the tests' private servers; Check,
# faketime and mandoc for the tests (mandoc lints the man pages; Debian's
# minimal images have no groff to fall back on); tzdata for the schedules'
# time zones (and their daylight-saving tests); python3 and python3-redis for
# the Python client (clients/python) and its tests, and dh-python,
# python3-all and python3-setuptools, which debian/ builds python3-delayq with;
# libpq-dev for the PostgreSQL outbox relay (docs/outbox.md).
# shellcheck disable=SC2034 # used by the scripts that source this file
DEPS_PACKAGES=(build-essential autoconf automake libtool pkg-config
    libhiredis-dev libevent-dev libssl-dev libconfig-dev redis-server check faketime mandoc
    tzdata openssl python3 python3-redis dh-python python3-all python3-setuptools libpq-dev)

# For the outbox's tests (tests/check_outbox, tests/example-outbox.sh): a
# PostgreSQL 15 server, which they start on private sockets of their own
# (Debian's package also makes and starts a cluster of its own, which they
# leave alone).  `./quickstart test` and CI install it; a build without it
# skips those tests and says so in one line.
# shellcheck disable=SC2034 # used by the scripts that source this file
DEPS_POSTGRES_PACKAGES=(postgresql-15)

# For the dashboard's browser test (tests/browser-ui.sh): Debian's Chromium,
# its chromedriver, and python3 to drive it (some 400 MB): `./quickstart
# test` and CI install them, `./quickstart demo` does not need them.  A
# build without them skips that test and says so in one line.
# shellcheck disable=SC2034 # used by the scripts that source this file
DEPS_BROWSER_PACKAGES=(chromium chromium-driver python3)

# For the Node client's tests (tests/node-client.sh, clients/node): Debian's
# node (18) and npm, which installs ioredis into the build tree from the npm
# registry.  A build without them skips those tests and says so in one line.
# Only where the machine has no node and npm of its own: a node installed
# from elsewhere (its own package, with npm inside) conflicts with Debian's
# npm package, and it serves as well.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    DEPS_PACKAGES+=(nodejs npm)
fi

# deps_missing PKG...: print, one a line, the packages dpkg does not have
# installed (unknown, removed, or half-installed).
deps_missing() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed \
            || echo "$p"
    done
}

# deps_install WHY PKG...: install the packages that are missing, with
# apt-get as root or through sudo otherwise, without questions, after one
# line saying what and WHY.  Returns 0 when all are installed (now or
# before).  Returns 69 after one line on standard error naming the packages
# to install by hand when it cannot: no dpkg-query or apt-get (not Debian),
# neither root nor a sudo that works without a password, or apt-get failed
# (its last lines are shown first).
deps_install() {
    local why=$1 me=${0#./} sudo="" log
    local -a missing
    shift
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "$me: no dpkg-query here (not Debian?): install by hand these Debian packages, or their equivalents, then build as README.md says under 'Building by hand': $*" >&2
        return 69
    fi
    mapfile -t missing < <(deps_missing "$@")
    [ ${#missing[@]} -gt 0 ] || return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "$me: no apt-get here to install the missing packages: install by hand: ${missing[*]}" >&2
        return 69
    fi
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=sudo
        else
            echo "$me: packages missing, and neither root nor sudo without a password to install them: run 'sudo apt-get install ${missing[*]}' (or that as root), then this again" >&2
            return 69
        fi
    fi
    echo "$me: installing ${missing[*]} ($why) with ${sudo:+sudo }apt-get"
    log=$(mktemp)
    if ! { $sudo apt-get update -q &&
           $sudo env DEBIAN_FRONTEND=noninteractive \
               apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        rm -f "$log"
        echo "$me: apt-get failed (above): install by hand: ${missing[*]}" >&2
        return 69
    fi
    rm -f "$log"
}
