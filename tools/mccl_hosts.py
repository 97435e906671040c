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
rdma   MLX JACCL's RDMA device towards each host of the file, in file order,
       null for the host itself: ["rdma_en3", null, "rdma_en4"] (an entry may
       be a list of devices).  Optional, but then on every host.  Passed on
       to the ranks (MLX_IBV_DEVICES).

MLX's ring hostfile ([{"ssh": "h1", "ips": ["10.0.0.1"]}, ...]) is this
format.  MLX's rank list (the file MLX_HOSTFILE names) is accepted too:

    [["10.0.0.1:5000"], ["10.0.0.1:5001"], ["10.0.0.2:5000"]]

one entry per rank with its "ip:port" addresses; the rank runs on the host
of the first ip (without ssh where that address is loopback or this
machine's), listens on the entry's ips, and the ports are only checked:
mccl picks its own.
"""

import ipaddress
import json
import socket

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
HOST_KEYS = ("ssh", "ips", "slots", "env", "rdma")


class HostError(Exception):
    """A bad --hosts list or hostfile; the message names the host and field."""


class Host:
    def __init__(self, ssh, ips=(), slots=1, env=None, rdma=None, slots_given=True):
        self.ssh = ssh
        self.ips = list(ips)
        self.slots = slots
        # False where the user stated no slots (the default 1): -n may then
        # place more ranks there, as mlx.launch and mpirun do.
        self.slots_given = slots_given
        self.env = dict(env or {})
        # RDMA device towards each host of the hostfile (None: no device).
        self.rdma = None if rdma is None else list(rdma)

    @property
    def local(self):
        return self.ssh in LOCAL_NAMES

    def to_json(self):
        out = {"ssh": self.ssh, "ips": self.ips, "slots": self.slots}
        if self.env:
            out["env"] = self.env
        if self.rdma is not None:
            out["rdma"] = self.rdma
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
        name, slots, given = item, 1, True
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
        else:
            given = False
        if item.startswith("[") and not rest:
            given = False
        if not name:
            raise HostError(f"--hosts: empty host name in {item!r}")
        hosts.append(Host(name, slots=slots, slots_given=given))
    return hosts


def is_rdma_device(device):
    """An "rdma" entry: null, a device name, or (newer MLX) a list of names."""
    if device is None or (isinstance(device, str) and device):
        return True
    return (isinstance(device, list) and bool(device)
            and all(isinstance(d, str) and d for d in device))


def host_from_json(entry, index, path):
    where = f"{path}: host {index}"
    if not isinstance(entry, dict):
        raise HostError(f"{where}: expected an object with keys {', '.join(HOST_KEYS)} "
                        f"(or, in a list of ranks, a list of \"ip:port\" addresses), "
                        f"got {json.dumps(entry)}")
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
    rdma = entry.get("rdma")
    if rdma is not None and (not isinstance(rdma, list) or not all(map(is_rdma_device, rdma))):
        raise HostError(f"{where}: \"rdma\" must be a list of RDMA device names or null, "
                        "one per host")
    return Host(ssh, ips, slots, {k: str(v) for k, v in env.items()}, rdma,
                slots_given="slots" in entry)


class Hostfile:
    """What a hostfile says.

    hosts: every host, in file order.  ranks: for MLX's list of ranks, the
    host of each rank in rank order (a host may come back later in the list);
    None for a list of hosts, whose ranks fill the hosts' slots in order.
    """

    def __init__(self, path, hosts, ranks=None):
        self.path = path
        self.hosts = hosts
        self.ranks = ranks

    @property
    def has_rdma(self):
        return any(h.rdma is not None for h in self.hosts)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as err:
        raise HostError(f"cannot read hostfile {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise HostError(f"hostfile {path} is not valid JSON: {err}") from None


def read_hostfile(path):
    """A hostfile in any of the accepted forms -> Hostfile."""
    data = read_json(path)
    if isinstance(data, dict):
        if set(data) != {"hosts"}:
            raise HostError(f"{path}: expected {{\"hosts\": [...]}} or a list of hosts")
        data = data["hosts"]
    if not isinstance(data, list) or not data:
        raise HostError(f"{path}: the host list is empty")
    if isinstance(data[0], list):
        return ranks_from_json(data, path)
    hosts = [host_from_json(entry, i, path) for i, entry in enumerate(data)]
    check_rdma(hosts, path)
    return Hostfile(path, hosts)


def load_hostfile(path):
    return read_hostfile(path).hosts


def check_rdma(hosts, path):
    """JACCL needs a device list on every host, one entry per host, with null
    for itself; a list of another length means the hosts are out of order."""
    if not any(h.rdma is not None for h in hosts):
        return
    for index, host in enumerate(hosts):
        where = f"{path}: host {index} ({host.ssh})"
        if host.rdma is None:
            raise HostError(f"{where}: \"rdma\" is missing (the other hosts have one: "
                            "give it on every host or on none)")
        if len(host.rdma) != len(hosts):
            raise HostError(f"{where}: \"rdma\" has {len(host.rdma)} entries for "
                            f"{len(hosts)} hosts (one per host, in file order)")
        if host.rdma[index] is not None:
            raise HostError(f"{where}: \"rdma\" entry {index} is this host itself "
                            f"and must be null, got {host.rdma[index]!r}")


def parse_address(text, where):
    """"ip:port" (IPv6 as "[ip]:port") -> (ip, port)."""
    if not isinstance(text, str):
        raise HostError(f"{where}: expected \"ip:port\" strings, got {json.dumps(text)}")
    ip, sep, port = text.rpartition(":")
    if ip.startswith("[") and ip.endswith("]"):
        ip = ip[1:-1]
    try:
        ipaddress.ip_address(ip)
        ok = sep and 0 < int(port) < 65536
    except ValueError:
        ok = False
    if not ok:
        raise HostError(f"{where}: {text!r} is not \"ip:port\" (an IP address and a "
                        "port 1-65535)")
    return ip, int(port)


def is_local_address(ip):
    """Whether ip is loopback or an address of this machine (it can be bound)."""
    address = ipaddress.ip_address(ip)
    if address.is_loopback:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((ip, 0))
        return True
    except OSError:
        return False


def ranks_from_json(data, path):
    """MLX's list of ranks: [["ip:port", ...], ...] -> Hostfile with ranks.

    A host is the first ip of an entry; entries with the same first ip are
    ranks of one host, which listens on all of their ips.
    """
    by_ip = {}
    ranks = []
    for index, entry in enumerate(data):
        where = f"{path}: entry {index}"
        if not isinstance(entry, list) or not entry:
            raise HostError(f"{where}: expected a non-empty list of \"ip:port\" addresses "
                            f"(entry 0 is one), got {json.dumps(entry)}")
        ips = [parse_address(text, where)[0] for text in entry]
        host = by_ip.get(ips[0])
        if host is None:
            ssh = "localhost" if is_local_address(ips[0]) else ips[0]
            host = by_ip[ips[0]] = Host(ssh, slots=0)
        host.slots += 1
        host.ips += [ip for ip in ips if ip not in host.ips]
        ranks.append(host)
    return Hostfile(path, list(by_ip.values()), ranks)


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
        if want > capacity and not any(h.slots_given for h in hosts):
            # No slots stated: spread the ranks evenly, the first hosts
            # taking one more where they do not divide.
            base, extra = divmod(want, len(hosts))
            counts = [base + (1 if i < extra else 0) for i in range(len(hosts))]
            return _placements(hosts, counts)
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
    return _placements(hosts, counts)


def _placements(hosts, counts):
    placements = []
    for host, count in zip(hosts, counts):
        for local in range(count):
            placements.append(Placement(len(placements), host, local, count))
    return placements


def place_rank_list(ranks, total=None):
    """Ranks where a list of ranks puts them; total: only the first that many."""
    if total is not None:
        if total > len(ranks):
            raise HostError(f"-n {total} is more than the {len(ranks)} ranks the hostfile lists")
        ranks = ranks[:total]
    per_host = {}
    for host in ranks:
        per_host[id(host)] = per_host.get(id(host), 0) + 1
    seen = {}
    placements = []
    for rank, host in enumerate(ranks):
        local = seen.get(id(host), 0)
        seen[id(host)] = local + 1
        placements.append(Placement(rank, host, local, per_host[id(host)]))
    return placements


def rdma_matrix(placements, hosts):
    """MLX_IBV_DEVICES's content: per rank, the device towards every rank
    (None between ranks of one host, which do not use RDMA)."""
    index = {id(h): i for i, h in enumerate(hosts)}
    return [[None if a.host is b.host else a.host.rdma[index[id(b.host)]]
             for b in placements] for a in placements]
