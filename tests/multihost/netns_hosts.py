"""Emulated hosts for tests: network namespaces joined by veth pairs and
Linux bridges, optionally shaped with tc, each running its own sshd.

    with EmulatedHosts(count=3, networks=1, rate="1gbit") as hosts:
        hosts.write_hostfile(path, slots=2)
        hosts.run(0, [python, mcclrun, "--ssh", hosts.ssh_command, ...])

Layout (names carry this process's pid and a counter, so parallel runs and
successive instances never collide):

    mccl<pid>x<n>sw        the "switch": bridge br<k> per network k
    mccl<pid>x<n>h<i>      host i: lo, eth<k> = 10.77.<k>.<i+1>/24, sshd on eth0

Addresses exist only inside these namespaces; nothing is added to the
caller's namespace.  With `rate`, both directions of every host link are
limited (tbf or htb on the host's eth<k> and on its switch port).  Jobs
start from inside host 0 (`run(0, ...)`), like a login node that is one of
the machines; ssh reaches every host, host 0 included, by its name h<i>.

Cleanup removes the sshds, every process left in the namespaces and the
namespaces themselves (the veths and bridges go with them), on exit, on
exceptions and on SIGTERM; namespaces left by a run that was SIGKILLed are
removed by the next run (their pid is dead).  Needs root, iproute2 and
openssh-server.
"""

import atexit
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

PREFIX = "mccl"
SUBNET = "10.77.{net}.{host}"
SSHD = "/usr/sbin/sshd"
COMMAND_TIMEOUT = 30  # seconds for any one ip/tc/ssh-keygen call
NAME_RE = re.compile(rf"^{PREFIX}(\d+)x\d+(sw|h\d+)$")
_instances = itertools.count()


class SetupError(Exception):
    """A step of building the emulated hosts failed; the message says which."""


def sh(*argv, timeout=COMMAND_TIMEOUT, check=True):
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{' '.join(argv)}: no answer within {timeout} s") from None
    if check and done.returncode != 0:
        raise SetupError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return done


def missing_requirements():
    """Why this machine cannot emulate hosts, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (iproute2, openssh-client)"
    if not os.path.exists(SSHD):
        return f"{SSHD} is missing: apt-get install openssh-server (tools/dev.sh installs it)"
    return None


def pid_alive(pid):
    """Whether `pid` runs; a zombie (killed, not yet reaped) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_namespace(name):
    """SIGKILL whatever runs in namespace `name`, then delete it."""
    pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    # A process may take a moment to leave; deleting only unmounts the name.
    sh("ip", "netns", "del", name, check=False)


def remove_stale_namespaces():
    """Namespaces of earlier runs whose process is gone (killed by a timeout)."""
    for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = NAME_RE.match(name)
        if match and not pid_alive(int(match.group(1))):
            kill_namespace(name)


class EmulatedHosts:
    def __init__(self, count=3, networks=1, rate=None, shaper="htb"):
        if shaper not in ("htb", "tbf"):
            raise ValueError(f"shaper must be htb or tbf, got {shaper!r}")
        self.count = count
        self.networks = networks
        self.rate = rate
        self.shaper = shaper
        # pid first: remove_stale_namespaces() reads it back.
        self.tag = f"{PREFIX}{os.getpid()}x{next(_instances)}"
        self.switch = f"{self.tag}sw"
        self.namespaces = []
        self.sshd = []
        self.workdir = None
        self.ssh_config = None
        self.previous_sigterm = None

    # -- names --------------------------------------------------------------

    def namespace(self, host):
        return f"{self.tag}h{host}"

    def address(self, host, net=0):
        return SUBNET.format(net=net, host=host + 1)

    def name(self, host):
        return f"h{host}"

    @property
    def ssh_command(self):
        """What mcclrun's --ssh should be."""
        return f"ssh -F {self.ssh_config}"

    # -- setup --------------------------------------------------------------

    def __enter__(self):
        why = missing_requirements()
        if why:
            raise SetupError(why)
        remove_stale_namespaces()
        atexit.register(self.close)
        self.previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            self.workdir = tempfile.mkdtemp(prefix=f"{self.tag}-")
            self._make_namespaces()
            self._make_keys()
            for host in range(self.count):
                self._start_sshd(host)
            self._wait_for_ssh()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _on_sigterm(self, signum, frame):
        self.close()
        raise SystemExit(128 + signum)

    def _add_namespace(self, name):
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    def _make_namespaces(self):
        self._add_namespace(self.switch)
        for net in range(self.networks):
            sh("ip", "-n", self.switch, "link", "add", f"br{net}", "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", f"br{net}", "up")
        for host in range(self.count):
            ns = self.namespace(host)
            self._add_namespace(ns)
            for net in range(self.networks):
                port, nic = f"h{host}n{net}", f"eth{net}"
                # Created inside the switch namespace, the peer end straight in
                # the host's: no name ever appears in the caller's namespace.
                sh("ip", "-n", self.switch, "link", "add", port, "type", "veth",
                   "peer", "name", nic, "netns", ns)
                sh("ip", "-n", self.switch, "link", "set", port, "master", f"br{net}", "up")
                sh("ip", "-n", ns, "addr", "add", f"{self.address(host, net)}/24", "dev", nic)
                sh("ip", "-n", ns, "link", "set", nic, "up")
                if self.rate:
                    self._shape(ns, nic)
                    self._shape(self.switch, port)

    def _shape(self, ns, dev):
        """Limit what leaves `dev` to self.rate (both ends: both directions)."""
        tc = ("ip", "netns", "exec", ns, "tc")
        if self.shaper == "tbf":
            # The bucket must hold a jiffy's worth of bytes at full rate and a
            # whole GSO segment, or tbf would starve big segments.
            sh(*tc, "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
               "burst", "1mb", "latency", "20ms")
        else:
            sh(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
            sh(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
               "rate", self.rate, "ceil", self.rate, "burst", "1mb", "cburst", "1mb")

    def _make_keys(self):
        self.client_key = os.path.join(self.workdir, "client_key")
        self.host_key = os.path.join(self.workdir, "host_key")
        for path in (self.client_key, self.host_key):
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path)
        shutil.copy(self.client_key + ".pub", os.path.join(self.workdir, "authorized_keys"))
        self.ssh_config = os.path.join(self.workdir, "ssh_config")
        with open(self.ssh_config, "w") as f:
            for host in range(self.count):
                f.write(f"Host {self.name(host)}\n  HostName {self.address(host)}\n")
            f.write("Host *\n"
                    "  User root\n"
                    f"  IdentityFile {self.client_key}\n"
                    "  IdentitiesOnly yes\n"
                    "  StrictHostKeyChecking no\n"
                    "  UserKnownHostsFile /dev/null\n"
                    "  LogLevel ERROR\n"
                    "  ConnectTimeout 10\n"
                    "  BatchMode yes\n")

    def _start_sshd(self, host):
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        log = open(os.path.join(self.workdir, f"sshd-h{host}.log"), "w")
        options = {
            "ListenAddress": self.address(host), "Port": "22", "HostKey": self.host_key,
            "AuthorizedKeysFile": os.path.join(self.workdir, "authorized_keys"),
            "StrictModes": "no", "UsePAM": "no", "PermitRootLogin": "prohibit-password",
            "PasswordAuthentication": "no", "KbdInteractiveAuthentication": "no",
            "PidFile": "none", "LogLevel": "ERROR", "MaxStartups": "100",
            # bash sources ~/.bashrc for ssh commands unless it believes it is
            # nested; what the machine's rc files do (e.g. wait for a tool's
            # lock) is not what these tests are about.
            "SetEnv": "SHLVL=1",
        }
        argv = ["ip", "netns", "exec", self.namespace(host), SSHD, "-D", "-e", "-f", "/dev/null"]
        for key, value in options.items():
            argv += ["-o", f"{key}={value}"]
        self.sshd.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT))
        log.close()

    def _wait_for_ssh(self, timeout=20):
        deadline = time.monotonic() + timeout
        for host in range(self.count):
            while True:
                try:
                    done = self.run(0, ["ssh", "-F", self.ssh_config, self.name(host), "true"],
                                    timeout=15, check=False)
                except subprocess.TimeoutExpired:
                    raise SetupError(f"ssh {self.name(host)} true did not finish within 15 s "
                                     "(is the login shell's rc file waiting?)") from None
                if done.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    with open(os.path.join(self.workdir, f"sshd-h{host}.log")) as f:
                        log = f.read().strip()
                    raise SetupError(f"ssh to {self.name(host)} ({self.address(host)}) does not "
                                     f"work: {done.stderr.strip()}; sshd says: {log or 'nothing'}")
                time.sleep(0.2)

    # -- use ----------------------------------------------------------------

    def run(self, host, argv, timeout, check=True, **kwargs):
        """Run argv inside host's namespace, bounded by timeout seconds."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        done = subprocess.run(["ip", "netns", "exec", self.namespace(host), *argv],
                              timeout=timeout, **kwargs)
        if check and done.returncode != 0:
            raise SetupError(f"{' '.join(argv)} on {self.name(host)} exited "
                             f"{done.returncode}: {done.stderr.strip()[-2000:]}")
        return done

    def hostfile(self, slots=1, ips=True):
        hosts = []
        for host in range(self.count):
            entry = {"ssh": self.name(host), "slots": slots}
            if ips:
                entry["ips"] = [self.address(host, net) for net in range(self.networks)]
            hosts.append(entry)
        return {"hosts": hosts}

    # -- teardown -----------------------------------------------------------

    def close(self):
        for proc in self.sshd:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.sshd = []
        for name in reversed(self.namespaces):
            kill_namespace(name)
        self.namespaces = []
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if self.previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self.previous_sigterm)
            self.previous_sigterm = None


def run_tests():
    """The entry point of a test file that needs emulated hosts: its
    unittest cases, or exit 77 (ctest's SKIP_RETURN_CODE) saying why the
    hosts cannot be made here. Returns the exit status."""
    import unittest
    why = missing_requirements()
    if why:
        print(f"SKIPPED: emulated hosts are not available here: {why}")
        return 77
    program = unittest.main(module="__main__", verbosity=2, exit=False)
    return 0 if program.result.wasSuccessful() else 1
