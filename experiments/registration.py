"""When each claim was registered, and whether a result was measured after it (issue 40).

A claim's **registration** is what it fixes before any result is judged against it: its rule, its numbers, its
unit, its neutral, its category and the post's words its rule reads (``Claim.registration``; before the rules
existed, its kind and tolerance). A claim is registered at the last commit that changed its registration, found
by reading every commit that touched a claims file (``CLAIM_FILES``) in the repository's history; a registration
changed in the working tree and not committed is registered "now", after every result.

A result may judge a claim only if every commit it was measured at comes after the claim's registration (the
registration commit is an ancestor of it). A change of rule or target therefore makes every earlier result
unfit to judge the claim: the change forces a new measurement. ``unregistered`` says why a result may not judge
a claim; ``tests/quick/test_registration.py`` fails when a result the paper counts does not pass it.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the files that define claims, and the modules they need to be read at a commit
CLAIM_FILES = ("experiments/claims.py", "experiments/publications.py")
CLAIM_FOLDER_FILE = "claims.py"            # experiments/<name>/claims.py
SUPPORT_FILES = ("experiments/__init__.py", "experiments/registry.py", "experiments/experiment.py")
# the fields of a claim that register it: today's, and those it had before the rules (kind and tolerance)
REGISTERED = ("rule", "kind", "low", "high", "unit", "neutral", "tolerance", "category", "words")
NOW = "working tree"                       # a registration changed and not committed
GIT_TIMEOUT_S = 60.0
COMMIT_ID = re.compile(r"[0-9a-f]{7,64}")   # an abbreviated or whole commit id, SHA-1 or SHA-256
_READER = (
    "import dataclasses, json, sys\n"
    "from experiments.claims import CLAIMS\n"
    "fields = json.loads(sys.argv[1])\n"
    "print(json.dumps({cid: {f: v for f, v in dataclasses.asdict(c).items() if f in fields}\n"
    "                  for cid, c in CLAIMS.items()}, sort_keys=True))\n")


class RegistrationError(RuntimeError):
    """The history of the claims cannot be read (no git, a commit whose claims do not load)."""


def _git(args: list[str], root: Path) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RegistrationError(f"git {' '.join(args)} failed: {exc}") from None
    if proc.returncode != 0:
        raise RegistrationError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _claim_paths(listing: list[str]) -> list[str]:
    """The claims files among a tree's paths: ``CLAIM_FILES`` and every experiment folder's ``claims.py``."""
    return [p for p in listing if p in CLAIM_FILES or (p.startswith("experiments/") and p.count("/") == 2
                                                       and p.endswith("/" + CLAIM_FOLDER_FILE))]


def history(root: Path = ROOT) -> list[str]:
    """Every commit that touched a claims file, oldest first."""
    paths = list(CLAIM_FILES) + [f":(glob)experiments/*/{CLAIM_FOLDER_FILE}"]
    return _git(["log", "--format=%H", "--reverse", "--", *paths], root).split()


def registrations_at(commit: str, root: Path = ROOT) -> dict[str, dict[str, object]]:
    """Claim id -> its registered fields at ``commit``, read by loading that commit's claims in a fresh process."""
    listing = _git(["ls-tree", "-r", "--name-only", commit, "--", "experiments"], root).split("\n")
    with tempfile.TemporaryDirectory(prefix="lightspeed-registration-") as scratch:
        for path in _needed(listing):
            target = Path(scratch) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_git(["show", f"{commit}:{path}"], root))
        return _load(Path(scratch), f"commit {commit[:10]}")


def registrations_now(root: Path = ROOT) -> dict[str, dict[str, object]]:
    """Claim id -> its registered fields in the working tree at ``root``."""
    listing = [p.relative_to(root).as_posix() for p in (root / "experiments").rglob("*.py")]
    with tempfile.TemporaryDirectory(prefix="lightspeed-registration-") as scratch:
        for path in _needed(listing):
            target = Path(scratch) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((root / path).read_bytes())
        return _load(Path(scratch), "the working tree")


def _needed(listing: list[str]) -> list[str]:
    """The files that load a tree's claims: the claims files, their packages and the modules they import."""
    claims = _claim_paths(listing)
    packages = {str(Path(p).parent / "__init__.py") for p in claims}
    return [p for p in listing if p in claims or p in packages or p in SUPPORT_FILES]


def _load(scratch: Path, where: str) -> dict[str, dict[str, object]]:
    proc = subprocess.run([sys.executable, "-c", _READER, json.dumps(REGISTERED)], cwd=scratch, capture_output=True,
                          text=True, timeout=GIT_TIMEOUT_S,
                          env={"PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"})
    if proc.returncode != 0:
        raise RegistrationError(f"the claims of {where} do not load: {proc.stderr.strip()[-300:]}")
    loaded: dict[str, dict[str, object]] = json.loads(proc.stdout)
    return loaded


_REGISTERED: dict[tuple[str, str, str], dict[str, str]] = {}


def registered_at(root: Path = ROOT) -> dict[str, str]:
    """Claim id -> the commit that last changed its registration (``NOW`` when the working tree changed it).
    Computed once per HEAD and working-tree state of the claims files."""
    head = _git(["rev-parse", "HEAD"], root).strip()
    listing = [p.relative_to(root).as_posix() for p in (root / "experiments").rglob("*.py")]
    digest = hashlib.sha256(b"".join((root / p).read_bytes() for p in sorted(_claim_paths(listing)))).hexdigest()
    key = (str(root), head, digest)
    if key in _REGISTERED:
        return _REGISTERED[key]
    out: dict[str, str] = {}
    previous: dict[str, dict[str, object]] = {}
    for commit in history(root):
        current = registrations_at(commit, root)
        for cid, fields in current.items():
            if previous.get(cid) != fields:
                out[cid] = commit
        previous = current
    for cid, fields in registrations_now(root).items():
        if previous.get(cid) != fields:
            out[cid] = NOW
    _REGISTERED[key] = out
    return out


def is_ancestor(ancestor: str, commit: str, root: Path = ROOT) -> bool | None:
    """Whether ``ancestor`` is ``commit`` or one of its ancestors; None when git does not know ``commit``, or when
    either is not a commit id in hex (a results file may hold anything: it never becomes a git option)."""
    if not (COMMIT_ID.fullmatch(ancestor) and COMMIT_ID.fullmatch(commit)):
        return None
    try:
        proc = subprocess.run(["git", "merge-base", "--is-ancestor", ancestor, commit], cwd=root,
                              capture_output=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(proc.returncode)


def unregistered(claim_id: str, measured: list[str], root: Path = ROOT) -> str | None:
    """Why a result measured at the commits ``measured`` may not judge ``claim_id`` (None: it may)."""
    at = registered_at(root).get(claim_id)
    if at is None:
        return f"claim {claim_id} is not in the repository's history"
    if at == NOW:
        return f"claim {claim_id} was changed in the working tree, after every result"
    if not measured:
        return "the result records no commit it was measured at"
    for commit in measured:
        known = is_ancestor(at, commit, root)
        if known is None:
            return f"commit {commit[:10]} it was measured at is not in this repository"
        if not known:
            return (f"measured at {commit[:10]}, before claim {claim_id} was registered at {at[:10]}: its rule or "
                    "target changed since, so it must be measured again")
    return None
