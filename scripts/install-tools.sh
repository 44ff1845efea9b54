#!/usr/bin/env bash
# Install the Debian tools the test suite drives for real, when we can.
# As root: apt-get installs whatever is missing. As a user: say what is missing;
# the tests that need it skip with a reason naming the tool (under CI=true they fail).
set -u
declare -A PKG=([tshark]=tshark [tcpdump]=tcpdump [ip]=iproute2 [tc]=iproute2
                [nginx]=nginx-light [curl]=curl [nft]=nftables [iptables]=iptables
                [varnishd]=varnish [squid]=squid)
missing=()
for tool in "${!PKG[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || missing+=("${PKG[$tool]}")
done
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
apt-get update -q -o DPkg::Lock::Timeout=600 >/dev/null
apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
# nginx-light starts a system nginx on port 80; our tests run their own instances.
command -v systemctl >/dev/null && systemctl disable --now nginx >/dev/null 2>&1 || true
pkill -x nginx >/dev/null 2>&1 || true
# varnish and squid likewise: the benchmark starts its own instances on loopback.
for svc in varnish squid; do
    command -v systemctl >/dev/null && systemctl disable --now "$svc" >/dev/null 2>&1 || true
done
pkill -x varnishd >/dev/null 2>&1 || true
pkill -x squid >/dev/null 2>&1 || true
exit 0
