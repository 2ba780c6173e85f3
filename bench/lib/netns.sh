# shellcheck shell=bash
# The three-namespace path of the shaped-link tests, for the bench scripts
# (source this file): A (client) — R (router) — B (server), the same path,
# interface names and addresses as tests/e2e/common/topology.rs (`Path3`).
#
#   A va 10.NET.SUBNET.1 — ra 10.NET.SUBNET.254 R rb 10.NET.SUBNET+1.254 — vb 10.NET.SUBNET+1.1 B
#
# Default routes through R, IPv6 off, forwarding on in R. Shapers go on R's
# egresses: `rb` is the client-to-server way's narrow link, `ra` the
# server-to-client way's. Needs root and iproute2 (ip, tc). Names carry the
# script's PID, NET and SUBNET; path3_cleanup (call it from the script's
# EXIT trap) deletes every namespace built, and the veths with them.

PATH3_NAMESPACES=()

# path3_build NET SUBNET: build the path; sets P3_A, P3_R, P3_B (the
# namespaces), P3_NEAR and P3_FAR (A's and B's /24 without the last octet)
# and P3_ADDR_B (the server's address).
path3_build() {
	local net="$1" subnet="$2" ns pair dev
	P3_A="thr$$-$net-${subnet}a" P3_R="thr$$-$net-${subnet}r" P3_B="thr$$-$net-${subnet}b"
	P3_NEAR="10.$net.$subnet" P3_FAR="10.$net.$((subnet + 1))"
	P3_ADDR_B="$P3_FAR.1"
	for ns in "$P3_A" "$P3_R" "$P3_B"; do
		ip netns add "$ns"
		PATH3_NAMESPACES+=("$ns")
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
		ip -n "$ns" link set lo up
	done
	ip link add va netns "$P3_A" type veth peer name ra netns "$P3_R"
	ip link add vb netns "$P3_B" type veth peer name rb netns "$P3_R"
	ip -n "$P3_A" addr add "$P3_NEAR.1/24" dev va
	ip -n "$P3_R" addr add "$P3_NEAR.254/24" dev ra
	ip -n "$P3_R" addr add "$P3_FAR.254/24" dev rb
	ip -n "$P3_B" addr add "$P3_FAR.1/24" dev vb
	for pair in "$P3_A va" "$P3_R ra" "$P3_R rb" "$P3_B vb"; do
		read -r ns dev <<<"$pair"
		ip -n "$ns" link set "$dev" up
	done
	ip -n "$P3_A" route add default via "$P3_NEAR.254"
	ip -n "$P3_B" route add default via "$P3_FAR.254"
	ip netns exec "$P3_R" sysctl -qw net.ipv4.ip_forward=1
}

# path3_mtu MTU: the MTU of every veth on the last path built.
path3_mtu() {
	local pair ns dev
	for pair in "$P3_A va" "$P3_R ra" "$P3_R rb" "$P3_B vb"; do
		read -r ns dev <<<"$pair"
		ip -n "$ns" link set "$dev" mtu "$1"
	done
}

# path3_htb DEV RATE: replace R's root qdisc on DEV with htb at RATE (tc's
# spelling; its bucket is small, shared/TESTING.md).
path3_htb() {
	local dev="$1" rate="$2"
	ip netns exec "$P3_R" tc qdisc del dev "$dev" root 2>/dev/null || true
	ip netns exec "$P3_R" tc qdisc add dev "$dev" root handle 1: htb default 1
	# (tc warns that the default quantum is big at high rates: harmless here.)
	ip netns exec "$P3_R" tc class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" 2>/dev/null
}

# path3_htb_bfifo DEV RATE LIMIT: htb at RATE (r2q 100) on R's DEV with a
# byte FIFO of LIMIT bytes under it: the buffer's depth is its delay.
path3_htb_bfifo() {
	local dev="$1" rate="$2" limit="$3"
	ip netns exec "$P3_R" tc qdisc del dev "$dev" root 2>/dev/null || true
	ip netns exec "$P3_R" tc qdisc add dev "$dev" root handle 1: htb default 1 r2q 100
	ip netns exec "$P3_R" tc class add dev "$dev" parent 1: classid 1:1 htb rate "$rate"
	ip netns exec "$P3_R" tc qdisc add dev "$dev" parent 1:1 bfifo limit "$limit"
}

# path3_cleanup: delete every namespace path3_build made (the veths go
# with them). Best effort: it runs from EXIT traps.
path3_cleanup() {
	local ns
	for ns in "${PATH3_NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
	PATH3_NAMESPACES=()
}
