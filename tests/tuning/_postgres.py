"""A throwaway PostgreSQL server on 127.0.0.1 for the storage tests (initdb + pg_ctl).

PostgreSQL refuses to run as root: when the tests run as root the server runs as the
``postgres`` user (``runuser``) in a directory handed to it.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


def bin_dir() -> Path | None:
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))  # Debian: not on PATH
    if dirs and Path(dirs[-1], "initdb").exists():
        return Path(dirs[-1])
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("createdb") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    bin: Path
    root: Path
    port: int
    as_user: list[str]

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str) -> str:
        return f"postgresql://vtatune@127.0.0.1:{self.port}/{db}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([*self.as_user, *args], check=check, capture_output=True,
                              text=True, timeout=60)

    def start(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.root / "server.log"), "-w", "-o",
                  f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
                  "-c fsync=off -c max_connections=100", "start")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop",
                  check=False)

    def createdb(self, name: str) -> str:
        subprocess.run([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                        "-U", "vtatune", name], check=True, capture_output=True, timeout=60)
        return self.url(name)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> Server:
    """Start a server; raise RuntimeError when it cannot run here."""
    b = bin_dir()
    if b is None:
        raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) not found")
    root = Path(tempfile.mkdtemp(prefix="vtatune-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError("running as root and there is no postgres user") from None
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    server = Server(b, root, _free_port(), as_user)
    try:
        server._run(str(b / "initdb"), "-D", str(server.data), "-U", "vtatune",
                    "--auth=trust", "-E", "UTF8", "--no-sync")
        server.start()
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {exc.stderr.strip()[:200]}") from None
    return server
