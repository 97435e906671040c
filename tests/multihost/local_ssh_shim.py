#!/usr/bin/env python3
"""local_ssh_shim: a stand-in for the ssh client that runs the "remote"
command on this machine, for tests of mcclrun's remote launch without sshd.

    local_ssh_shim.py [ssh options...] HOST COMMAND

It accepts the options mcclrun passes to ssh, ignores HOST (printing it
would be what ssh's banner does: nothing) and runs COMMAND with sh as sshd
would, staying its parent so that, like sshd, its death is what the remote
wrapper watches for.  Exit status: the command's, or 255 when HOST is
"unreachable" (to test how mcclrun reports an ssh failure).
"""

import subprocess
import sys

# ssh options that take a value (the subset mcclrun and tests use).
TAKES_VALUE = {"-o", "-F", "-i", "-p", "-l", "-J"}


def main(argv):
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in TAKES_VALUE else 1
    if i + 1 >= len(argv):
        print("local_ssh_shim: usage: [options] HOST COMMAND", file=sys.stderr)
        return 255
    host, command = argv[i], " ".join(argv[i + 1:])
    if host == "unreachable":
        print(f"ssh: connect to host {host} port 22: No route to host", file=sys.stderr)
        return 255
    # A session of its own, as sshd gives a command: signals mcclrun sends to
    # its ssh client's process group do not reach the "remote" side, which
    # must notice the client's death by itself.
    return subprocess.call(["sh", "-c", command], start_new_session=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
