#!/usr/bin/env bash
# Install the Debian tools the test suite drives for real, when we can.
# As root: apt-get installs whatever is missing. As a user: say what is missing;
# the tests that need it skip with a reason naming the tool (under CI=true they fail).
# Servers installed here (nginx, varnish, squid) are stopped and disabled right after
# their install, because the tests start their own instances on loopback; a server
# that was already on the machine is never touched.
set -u
declare -A PKG=([tshark]=tshark [tcpdump]=tcpdump [ip]=iproute2 [tc]=iproute2
                [nginx]=nginx-light [curl]=curl [nft]=nftables [iptables]=iptables
                [varnishd]=varnish [squid]=squid [ping]=iputils-ping
                [wrk]=wrk)
declare -A SERVICE=([nginx-light]=nginx [varnish]=varnish [squid]=squid)
declare -A DAEMON=([nginx-light]=nginx [varnish]=varnishd [squid]=squid)
missing=()
for tool in "${!PKG[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || missing+=("${PKG[$tool]}")
done
# Python modules from Debian, found by their files: SimGrid's flow model for the VMC
# replay (vmc/sim.py loads python3-simgrid when it was built for the venv's Python).
compgen -G "/usr/lib/python3/dist-packages/simgrid*.so" >/dev/null || missing+=(python3-simgrid)
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
    echo "not root: missing Debian packages ${missing[*]}; tests that need them will skip."
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "no apt-get: install ${missing[*]} by hand; tests that need them will skip."
    exit 0
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
log=$(mktemp)
if ! { apt-get update -q -o DPkg::Lock::Timeout=600 &&
       apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"; } \
       >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "apt-get failed installing ${missing[*]} (full log: $log)" >&2
    exit 1
fi
rm -f "$log"
for pkg in "${missing[@]}"; do
    svc=${SERVICE[$pkg]:-}
    [ -n "$svc" ] || continue
    command -v systemctl >/dev/null && systemctl disable --now "$svc" >/dev/null 2>&1 || true
    pkill -x "${DAEMON[$pkg]}" >/dev/null 2>&1 || true
done
exit 0
