"""Hosts of a multi-machine mccl job: the hostfile format, --hosts lists and
rank placement.  Shared by mcclrun (which reads hostfiles) and mccl-topo
(which writes them).  Standard library only.

A hostfile is JSON, either a list of hosts or {"hosts": [...]}:

    {"hosts": [
      {"ssh": "node1", "ips": ["10.0.0.1", "10.1.0.1"], "slots": 2,
       "env": {"MCCL_SOCKETS_PER_PEER": "2"}},
      {"ssh": "node2", "ips": ["10.0.0.2", "10.1.0.2"], "slots": 2}
    ]}

ssh    the name ssh connects to (an ssh_config alias, a DNS name or an IP);
       "localhost" (or 127.0.0.1, ::1) runs the ranks without ssh
ips    addresses this host's ranks listen on for peers (MCCL_LISTEN_ADDR);
       the first host's first one is MASTER_ADDR.  Optional.
slots  ranks to start on this host (default 1)
env    extra environment for this host's ranks.  Optional.
"""

import ipaddress
import json

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
HOST_KEYS = ("ssh", "ips", "slots", "env")


class HostError(Exception):
    """A bad --hosts list or hostfile; the message names the host and field."""


class Host:
    def __init__(self, ssh, ips=(), slots=1, env=None):
        self.ssh = ssh
        self.ips = list(ips)
        self.slots = slots
        self.env = dict(env or {})

    @property
    def local(self):
        return self.ssh in LOCAL_NAMES

    def to_json(self):
        out = {"ssh": self.ssh, "ips": self.ips, "slots": self.slots}
        if self.env:
            out["env"] = self.env
        return out

    def __repr__(self):
        return f"Host({self.ssh!r}, ips={self.ips}, slots={self.slots})"


def parse_slots(text, where):
    try:
        slots = int(text)
    except (TypeError, ValueError):
        raise HostError(f"{where}: slots must be a whole number, got {text!r}") from None
    if slots < 1:
        raise HostError(f"{where}: slots must be >= 1, got {slots}")
    return slots


def parse_hosts_arg(text):
    """--hosts "h1,h2:4" -> hosts; a host without :slots has one slot.

    An IPv6 address needs brackets to carry slots: "[fd00::1]:2".
    """
    hosts = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise HostError(f"--hosts {text!r}: empty host name")
        name, slots = item, 1
        if item.startswith("["):
            close = item.find("]")
            if close < 0:
                raise HostError(f"--hosts: {item!r} lacks the closing ]")
            name, rest = item[1:close], item[close + 1:]
            if rest:
                if not rest.startswith(":"):
                    raise HostError(f"--hosts: unexpected {rest!r} after {item[:close + 1]}")
                slots = parse_slots(rest[1:], f"--hosts host {name}")
        elif item.count(":") == 1:
            name, slot_text = item.split(":")
            slots = parse_slots(slot_text, f"--hosts host {name}")
        if not name:
            raise HostError(f"--hosts: empty host name in {item!r}")
        hosts.append(Host(name, slots=slots))
    return hosts


def host_from_json(entry, index, path):
    where = f"{path}: host {index}"
    if not isinstance(entry, dict):
        raise HostError(f"{where}: expected an object with keys {', '.join(HOST_KEYS)}")
    ssh = entry.get("ssh")
    if not isinstance(ssh, str) or not ssh:
        raise HostError(f"{where}: \"ssh\" must be a non-empty string")
    where = f"{path}: host {index} ({ssh})"
    unknown = sorted(set(entry) - set(HOST_KEYS))
    if unknown:
        raise HostError(f"{where}: unknown key(s) {', '.join(unknown)} "
                        f"(allowed: {', '.join(HOST_KEYS)})")
    ips = entry.get("ips", [])
    if isinstance(ips, str):
        ips = [ips]
    if not isinstance(ips, list):
        raise HostError(f"{where}: \"ips\" must be a list of IP addresses")
    for ip in ips:
        try:
            ipaddress.ip_address(ip)
        except (TypeError, ValueError):
            raise HostError(f"{where}: \"ips\" entry {ip!r} is not an IP address") from None
    slots = parse_slots(entry.get("slots", 1), where)
    env = entry.get("env", {})
    if not isinstance(env, dict) or not all(
            isinstance(k, str) and k and isinstance(v, (str, int, float)) for k, v in env.items()):
        raise HostError(f"{where}: \"env\" must map names to strings")
    return Host(ssh, ips, slots, {k: str(v) for k, v in env.items()})


def load_hostfile(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as err:
        raise HostError(f"cannot read hostfile {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise HostError(f"hostfile {path} is not valid JSON: {err}") from None
    if isinstance(data, dict):
        if set(data) != {"hosts"}:
            raise HostError(f"{path}: expected {{\"hosts\": [...]}} or a list of hosts")
        data = data["hosts"]
    if not isinstance(data, list) or not data:
        raise HostError(f"{path}: the host list is empty")
    return [host_from_json(entry, i, path) for i, entry in enumerate(data)]


def dump_hostfile(hosts):
    return json.dumps({"hosts": [h.to_json() for h in hosts]}, indent=2) + "\n"


class Placement:
    """Where one rank runs."""

    def __init__(self, rank, host, local_rank, local_world):
        self.rank = rank
        self.host = host
        self.local_rank = local_rank
        self.local_world = local_world


def place_ranks(hosts, total=None, per_host=None):
    """Ranks in host order, contiguous per host.

    per_host: that many on every host (slots ignored).  total: the first
    `total` slots in host order (an error if there are fewer).  Neither: every
    slot of every host.
    """
    if per_host is not None:
        counts = [per_host] * len(hosts)
        if total is not None and total != per_host * len(hosts):
            raise HostError(f"-n {total} does not equal --per-host {per_host} x "
                            f"{len(hosts)} hosts; give one of them")
    else:
        capacity = sum(h.slots for h in hosts)
        want = capacity if total is None else total
        if want > capacity:
            raise HostError(f"-n {want} ranks do not fit the {capacity} slots of "
                            f"{len(hosts)} host(s) ("
                            + ", ".join(f"{h.ssh}:{h.slots}" for h in hosts)
                            + "); add slots or use --per-host")
        counts = []
        for h in hosts:
            take = min(h.slots, want)
            counts.append(take)
            want -= take
    placements = []
    for host, count in zip(hosts, counts):
        for local in range(count):
            placements.append(Placement(len(placements), host, local, count))
    return placements
