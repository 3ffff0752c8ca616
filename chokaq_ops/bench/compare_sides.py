"""The two sides of `chokaq bench compare`: the working tree, and a base revision exported from git.

Each side runs its benches as `chokaq bench NAME ...` (python -c calling chokaq_ops.cli.main) in a
process of its own, started in the side's tree with PYTHONPATH pointing at it, so `chokaq_ops`,
`chokaq_api` and `sql/` come from that tree and nowhere else (the editable install's path entry comes
after both; `probe` checks it before the first round). Both sides use the same interpreter and
third-party packages (the current venv's) unless `--base-python` names another: the comparison is then
of chokaq's code alone, which is what a ratio against a previous commit is about, and no package index
is needed to set a side up.

A peer queue (`--peer pgqueuer`) is a side too: its harness (chokaq_ops/bench/peer_pgqueuer.py, from the
working tree) runs as `python -m <harness> NAME ...` in a process of its own, like a revision's bench, and
prints lines shaped like ours; `PeerSide.command` is all that differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from chokaq_ops import errors

# What decides how a bench measures: its module, the harness, and the seeding SQL.
BENCH_CODE = ("chokaq_ops/bench", "sql/sqlite/bench.sql", "sql/postgresql/bench.sql")


_MAIN = "import sys; from chokaq_ops.cli import main; sys.exit(main(sys.argv[1:]))"

# Peer queues `chokaq bench compare --peer NAME` can measure: the harness module of each. A harness has
# BENCHES (the bench names it measures as ours do), check_args(bench, flags), versions() and a __main__.
PEERS: dict[str, str] = {"pgqueuer": "chokaq_ops.bench.peer_pgqueuer"}


class SideFailed(errors.ChokaqError):
    """A side's bench process failed; the message carries the end of its stderr."""


@dataclass(frozen=True)
class Side:
    name: str  # "base" or "head"
    rev: str  # the commit (base), or "working tree" (head, with its uncommitted changes)
    root: Path
    python: str
    db: str

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.root)
        env.pop("PYTHONSAFEPATH", None)  # it would drop the tree (the working directory) from sys.path
        env.pop("PYTHONHOME", None)
        return env

    def command(self, bench: str, args: Sequence[str], repeat: int) -> list[str]:
        # `-c` rather than `-m chokaq_ops.cli`: older revisions have no cli/__main__.py. Like `-m`, `-c`
        # puts the working directory (the side's tree) first on sys.path.
        return [self.python, "-c", _MAIN, "bench", bench, "--db", self.db, "--repeat", str(repeat), *args]

    def run(self, bench: str, args: Sequence[str], repeat: int) -> list[dict[str, Any]]:
        """One invocation of a bench on this side: its JSON lines."""
        done = self._spawn(self.command(bench, args, repeat))
        if done.returncode != 0:
            tail = done.stderr.strip()[-2000:]
            raise SideFailed(f"bench {bench} on {self.name} ({self.rev}) exited {done.returncode}: {tail}")
        lines = []
        for line in done.stdout.splitlines():
            if line.strip():
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    continue  # not a measurement (a stray print of older code)
        return lines

    def _spawn(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """A process of this side: in its tree, with its PYTHONPATH; its output captured."""
        return subprocess.run(
            argv, cwd=self.root, env=self.env(), capture_output=True, text=True, check=False
        )

    def probe(self) -> dict[str, str]:
        """Where this side's interpreter finds chokaq's packages; refuses a side that would import another
        tree's code (the ratio would then compare a tree with itself)."""
        code = (
            "import json, chokaq_ops, chokaq_api; "
            "print(json.dumps([chokaq_ops.__file__, chokaq_api.__file__]))"
        )
        done = self._spawn([self.python, "-c", code])
        if done.returncode != 0:
            raise SideFailed(f"{self.name} ({self.rev}) cannot import chokaq: {done.stderr.strip()[-1000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        root = self.root.resolve()
        for path in found:
            if not Path(path).resolve().is_relative_to(root):
                raise SideFailed(f"{self.name} imports {path}, not the tree at {root}")
        return {"chokaq_ops": found[0], "chokaq_api": found[1]}


@dataclass(frozen=True)
class PeerSide(Side):
    """The base side when it is a peer queue: the peer's harness from this tree, not `chokaq bench`."""

    peer: str = "pgqueuer"
    extra: tuple[str, ...] = ()  # flags for the peer's harness alone (`--peer-args`), after the shared ones

    @property
    def module(self) -> str:
        return PEERS[self.peer]

    def command(self, bench: str, args: Sequence[str], repeat: int) -> list[str]:
        head = [self.python, "-m", self.module, bench, "--db", self.db, "--repeat", str(repeat)]
        return [*head, *args, *self.extra]

    def probe(self) -> dict[str, str]:
        """The harness this side runs (it must come from this tree) and the peer's package versions;
        refuses an interpreter without the peer installed."""
        code = (
            f"import json, {self.module} as h; print(json.dumps({{'harness': h.__file__, **h.versions()}}))"
        )
        done = self._spawn([self.python, "-c", code])
        if done.returncode != 0:
            raise SideFailed(
                f"the peer {self.peer} cannot run with {self.python}: {done.stderr.strip()[-1000:]}"
            )
        found: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
        if not Path(found["harness"]).resolve().is_relative_to(self.root.resolve()):
            raise SideFailed(f"{self.name} imports {found['harness']}, not the tree at {self.root}")
        return found

    def versioned(self, versions: dict[str, str]) -> PeerSide:
        """This side with its rev naming the peer's version, as round lines and the table show it."""
        return dataclasses.replace(self, rev=f"{self.peer} {versions.get(self.peer, '?')}")


def peer_harness(name: str) -> ModuleType:
    """The harness module of a peer (imports nothing of the peer itself)."""
    return importlib.import_module(PEERS[name])


def repo_root() -> Path:
    """The checkout this chokaq_ops was imported from (the working tree compared against its base)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        raise errors.UsageError(f"bench compare runs from a git checkout; {root} is not one")
    return root


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise errors.UsageError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def resolve(root: Path, rev: str) -> str:
    """The full commit id of `rev` (a branch, tag, abbreviated id, HEAD~3 ...)."""
    return _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")


def export(root: Path, commit: str, into: Path) -> Path:
    """The tree of `commit` as plain files under `into` (git archive): no worktree to register or prune,
    and nothing of the working tree's uncommitted state."""
    tree = into / f"base-{commit[:12]}"
    tree.mkdir(parents=True)
    proc = subprocess.Popen(
        ["git", "-C", str(root), "archive", "--format=tar", commit], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        tar.extractall(tree, filter="data")
    if proc.wait() != 0:
        raise errors.UsageError(f"git archive {commit} failed")
    return tree


def digest(root: Path, paths: Sequence[str]) -> str:
    """A hash of the files under `paths` (relative to `root`): two trees with the same one measure alike."""
    h = hashlib.sha256()
    for rel in paths:
        base = root / rel
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        for f in files:
            if f.suffix in (".pyc",) or not f.exists():
                continue
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def schema_paths(dialect: str) -> list[str]:
    return [f"sql/{dialect}/schema.sql", f"sql/{dialect}/migrations"]


def interpreter(path: str | None) -> str:
    return path or sys.executable


# One bench invocation on one side: its JSON lines (Side.run; tests pass a fake).
Runner = Callable[[Side, str, Sequence[str], int], list[dict[str, Any]]]
