"""Folders dcplace writes: claimed with a marker, staged beside their destination, moved
into place whole. The one home of the rules that keep a user's files safe:

* dcplace writes into a folder only if it does not exist, is empty, or holds the marker
  file `.dcplace-folder.json` that dcplace wrote there, naming the same kind of output
  (`plan`, `batch`, `report`, ...). Anything else — a scenario folder, a file, a folder of
  notes — is refused with `OutputRefused`, which says what is there and how to proceed
  (the CLI exits 2).
* Everything is first written to a staging folder beside the destination, named
  `.<name>.dcplace-<host>-<pid>-<token>.tmp`, and moved into place only when complete, so a
  failed or killed run leaves the destination as it was.
* A staging folder left by a killed run is removed by the next run that writes the same
  destination, and only when its name says it was made on this host by a process that is
  no longer alive. A destination caught mid-swap (its old copy renamed aside, the process
  killed before the new one moved in) is restored from that copy.
* Only one run writes a destination at a time: `solve` takes `destination_lock` (an flock on
  `.<name>.dcplace-lock` beside it) before it solves and keeps it until its folder is in place,
  so a second run with the same --out is refused at once (naming the other process) instead of
  reporting a folder that the first then replaces, or being replaced by it. A lock left by a
  dead process is taken over. `batch` takes the same kind of lock inside its folder.
* Folders are made with os.mkdir, so they honour the umask like any other tool (a shared
  server's colleagues can read plans when the umask lets them).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from dcplace.models.versions import package_versions

MARKER = ".dcplace-folder.json"
KINDS = ("plan", "batch", "report", "export", "compare", "pareto")
_HOST = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:40] or "host"
NAME_MAX_BYTES = 255  # a file name's limit on Linux and macOS file systems
STAGING_NAME_BYTES = len(f"..dcplace-{_HOST}-{'9' * 10}-{'f' * 8}.tmp")  # what _sibling adds to a destination's name
MAX_NAME_BYTES = NAME_MAX_BYTES - STAGING_NAME_BYTES
_STAGING = re.compile(r"^\.(?P<name>.+)\.dcplace-(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)-[0-9a-f]+\.(?P<what>tmp|old)$")


class OutputRefused(Exception):
    """dcplace will not write to `path`: `message` says what is there, `fix` how to proceed."""

    def __init__(self, path: Path, message: str, fix: str):
        self.path, self.message, self.fix = Path(path), message, fix
        super().__init__(f"{path}: {message} Fix: {fix}")


def read_marker(folder: Path) -> dict | None:
    """The marker of a folder dcplace wrote, or None."""
    try:
        doc = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") in KINDS else None


def write_marker(folder: Path, kind: str, files: list[str] | None = None) -> None:
    """Mark `folder` as a `kind` folder dcplace wrote; `files` (relative paths) lists what a
    folder replaced whole holds, so that a later replacement can tell a user's own files."""
    doc = {"kind": kind, "written_by": f"dcplace {package_versions(('dcplace',))['dcplace']}",
           "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if files is not None:
        doc["files"] = sorted(files)
    (Path(folder) / MARKER).write_text(json.dumps(doc, indent=2) + "\n")


def _users_files(out_dir: Path, marker: dict) -> list[str]:
    """Files in a folder dcplace replaces whole that it did not write there: not in the
    marker's list and not inside a subfolder that carries its own dcplace marker."""
    written = set(marker.get("files", []))
    found = []
    for path in sorted(out_dir.rglob("*")):
        rel = path.relative_to(out_dir)
        if path.is_dir() or rel.as_posix() in written or rel.name == MARKER:
            continue
        if any(read_marker(out_dir / Path(*rel.parts[:i])) for i in range(1, len(rel.parts))):
            continue  # a report, export or other dcplace output written into the folder later
        found.append(rel.as_posix())
    return found


def _not_under_a_file(out_dir: Path) -> None:
    for parent in reversed(out_dir.parents):
        if parent.exists() and not parent.is_dir():
            raise OutputRefused(out_dir, f"lies under {parent}, which is a file, not a folder.", "choose an --out inside a folder.")


def check_new_folder(folder: str | Path) -> Path:
    """A folder that will become the user's (an exported scenario): it must be new or empty."""
    folder = Path(os.path.abspath(folder))
    _not_under_a_file(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        what = "is a file" if not folder.is_dir() else "exists and is not empty"
        raise OutputRefused(folder, f"{what}; it is written only as a new or empty folder.", "choose a new folder name.")
    return folder


def _not_in_plan_inputs(out_dir: Path) -> None:
    """A plan folder's inputs/ is hashed whole into its manifest: anything written under it would
    make the plan fail its check."""
    for folder in out_dir.parents:
        if folder.name == "inputs" and (read_marker(folder.parent) or {}).get("kind") == "plan":
            raise OutputRefused(out_dir, f"lies inside the inputs/ of the plan folder {folder.parent}, which hold the exact "
                                "inputs the plan was solved on; a file added there would make the plan fail `dcplace check`.",
                                "choose a folder outside inputs/ for --out (the plan folder itself or another).")


def check_destination(out_dir: str | Path, kind: str) -> Path:
    """The absolute destination, if dcplace may write a `kind` folder there; else OutputRefused."""
    if kind not in KINDS:
        raise ValueError(f"unknown output kind {kind!r}")
    out_dir = Path(os.path.abspath(out_dir))
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in str(out_dir)):  # GDAL's writers, among others, fail on them
        raise OutputRefused(out_dir, "has a control character (a line break, tab or the like) in its path.",
                            "give a folder path without control characters.")
    if len(out_dir.name.encode()) > MAX_NAME_BYTES:
        raise OutputRefused(out_dir, f"has a name of {len(out_dir.name.encode())} bytes; dcplace first writes beside it in a "
                            f"staging folder whose name adds {STAGING_NAME_BYTES} bytes, and file systems allow {NAME_MAX_BYTES}.",
                            f"give --out a folder name of at most {MAX_NAME_BYTES} bytes.")
    _not_under_a_file(out_dir)
    _not_in_plan_inputs(out_dir)
    if out_dir.is_symlink():
        raise OutputRefused(out_dir, "is a symbolic link; dcplace will not replace a link or write through it.",
                            "give the real folder's path, or a new folder name, as --out.")
    if out_dir.exists():
        if not out_dir.is_dir():
            raise OutputRefused(out_dir, "is a file; dcplace writes a folder there and will not replace a file it did not write.",
                                "choose a new folder name for --out, or move the file away.")
        marker = read_marker(out_dir)
        if marker is None:
            entries = sorted(p.name for p in out_dir.iterdir() if not _STAGING.match(p.name))
            if entries:
                shown = ", ".join(entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
                raise OutputRefused(
                    out_dir, f"already holds files dcplace did not write ({shown}); dcplace only replaces folders it wrote "
                    f"(they hold {MARKER}).", "choose a new or empty folder for --out.")
        elif marker["kind"] != kind:
            article = "an" if kind[0] in "aeiou" else "a"
            raise OutputRefused(out_dir, f"is a {marker['kind']} folder written by dcplace, not {article} {kind} folder.",
                                f"choose another folder for the {kind}.")
        elif "files" in marker and (extra := _users_files(out_dir, marker)):
            shown = ", ".join(extra[:4]) + (f" and {len(extra) - 4} more" if len(extra) > 4 else "")
            raise OutputRefused(out_dir, f"is a {kind} folder dcplace wrote, but it now also holds files dcplace did not "
                                f"write ({shown}); replacing the folder would delete them.",
                                "move those files elsewhere, or choose a new folder for --out.")
    existing = next(p for p in [out_dir, *out_dir.parents] if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputRefused(out_dir, f"cannot be written: {existing} is not writable by this user.", "choose a folder you can write to.")
    _probe(out_dir, existing)
    return out_dir


def _probe(out_dir: Path, existing: Path) -> None:
    """Create and remove a file in `existing`: os.access says yes to root everywhere, also on
    /sys, /proc or a read-only mount, which then refused the plan only after the solve."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".dcplace-probe-", dir=existing)
    except OSError as exc:
        raise OutputRefused(out_dir, f"cannot be written: {existing} does not take new files ({exc.strerror or exc}).",
                            "choose a folder you can write to.") from None
    os.close(fd)
    os.unlink(probe)


def process_alive(pid: int) -> bool:
    """Whether `pid` is a running process. A zombie (dead, not yet reaped: where nothing
    reaps orphans, a killed run's workers stay zombies) is not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: the signal test is all we have
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class OutputBusy(OutputRefused):
    """Another live process holds the lock on this output (exit 2, like any refused output)."""


class ExclusiveLock:
    """An flock on the file `path`: one writer at a time (released by the kernel even on kill -9).

    The file records the owner's pid, host and start time. A lock that is held although its
    recorded owner is dead (a process that inherited the file and outlived its run: a batch's
    pool worker where workers cannot be tied to their parent) is taken over: the file is
    replaced by a new one and locked. Every acquisition (and, with `remove`, every release)
    happens under a short flock on `guard` (a file, or a folder), so two runs cannot both take
    a stale lock over. `busy(owner)` makes the exception for a live owner ("pid 12 on host").
    With `remove` the file goes when the lock is released, so nothing is left beside the output."""

    def __init__(self, path: Path, guard: Path, busy, remove: bool = False):
        self.path, self.guard, self.busy, self.remove = Path(path), Path(guard), busy, remove

    def _try(self):
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle, False
        return handle, True

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        fd = os.open(self.guard, os.O_RDONLY) if self.guard.is_dir() else os.open(self.guard, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def __enter__(self):
        with self._guarded():
            handle, ok = self._try()
            if not ok:
                handle.seek(0)
                owner = handle.read().split()
                pid = int(owner[0]) if owner and owner[0].isdigit() else None
                same_host = len(owner) > 1 and owner[1] == socket.gethostname()
                if pid is not None and same_host and not process_alive(pid) and os.fstat(handle.fileno()).st_ino == os.stat(self.path).st_ino:
                    os.unlink(self.path)  # its holder is an orphan of a dead run; a new lock file
                    handle.close()
                    handle, ok = self._try()
                if not ok:
                    handle.close()
                    who = f"pid {pid} on {owner[1]}" + (f", since {owner[2]}" if len(owner) > 2 else "") if pid is not None and len(owner) > 1 else "a process"
                    raise self.busy(who)
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()} {socket.gethostname()} {datetime.now(timezone.utc).isoformat(timespec='seconds')}\n")
            handle.flush()
            self.handle = handle
        return self

    def __exit__(self, *exc):
        if self.remove:
            with self._guarded():  # no acquisition between the unlink and the unlock
                try:
                    if os.fstat(self.handle.fileno()).st_ino == os.stat(self.path).st_ino:
                        os.unlink(self.path)
                except OSError:
                    pass
                self._release()
        else:
            self._release()

    def _release(self) -> None:
        try:
            self.handle.truncate(0)
        except OSError:
            pass
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


@contextmanager
def destination_lock(out_dir: str | Path, kind: str) -> Iterator[Path]:
    """Hold the lock on the `kind` folder `out_dir` (checked with check_destination first) for a
    whole run: take it before the work, keep it until the folder is in place. Another live run
    holding it raises OutputBusy at once, naming that process. The lock file lives beside the
    destination (`.<name>.dcplace-lock`, removed on release); folders above it that are made
    for it and stay empty are removed again."""
    out_dir = check_destination(out_dir, kind)
    made = [p for p in reversed(out_dir.parents) if not p.exists()]
    out_dir.parent.mkdir(parents=True, exist_ok=True)

    def busy(who: str) -> OutputBusy:
        return OutputBusy(out_dir, f"is being written by another dcplace run ({who}); two runs writing one folder would "
                          "leave only one of their results.", "wait for that run to finish, or give this one another --out.")

    lock = out_dir.parent / f".{out_dir.name}.dcplace-lock"
    try:
        with ExclusiveLock(lock, out_dir.parent, busy, remove=True):
            _OWN_LOCKS.add(lock)  # a SIGTERM removes it with the staging (remove_own_staging)
            try:
                yield out_dir
            finally:
                _OWN_LOCKS.discard(lock)
    finally:
        for folder in reversed(made):
            try:
                folder.rmdir()  # made for the lock and still empty (a run that failed before writing)
            except OSError:
                break


def remove_stale_staging(parent: Path, name: str | None = None) -> list[Path]:
    """Remove staging folders in `parent` (of destination `name`, or of any) that a dead
    process of this host left; restore a destination caught mid-swap. Returns what went."""
    removed = []
    try:
        entries = list(Path(parent).iterdir())
    except OSError:
        return removed
    for path in sorted(entries, key=lambda p: p.name.endswith(".tmp")):  # .old first: restore before cleaning
        m = _STAGING.match(path.name)
        if not m or (name is not None and m["name"] != name) or m["host"] != _HOST or process_alive(int(m["pid"])):
            continue
        destination = path.with_name(m["name"])
        if m["what"] == "old" and not destination.exists():
            os.rename(path, destination)  # killed between the two renames of a swap: the old folder comes back
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


_OWN_STAGES: set[Path] = set()  # staging folders of this process not yet moved into place or removed
_OWN_LOCKS: set[Path] = set()  # destination lock files this process holds (destination_lock)
_OWN_SWAPS: dict[Path, Path] = {}  # old folder set aside -> its destination, while a swap is between its renames
os.register_at_fork(after_in_child=lambda: (_OWN_STAGES.clear(), _OWN_SWAPS.clear(), _OWN_LOCKS.clear()))  # a forked worker owns none of its parent's


_MOVES: dict = {"depth": 0, "pending": None}  # files moving into place, and a signal that came meanwhile


@contextmanager
def _moving() -> Iterator[None]:
    """Files or folders moving into place: a handler wrapped by `defer_while_moving` that is
    called meanwhile runs when the last move is done, so a stopped run leaves the old output
    or the new one, never half of each."""
    _MOVES["depth"] += 1
    try:
        yield
    finally:
        _MOVES["depth"] -= 1
        if not _MOVES["depth"] and _MOVES["pending"]:
            (handler, signum), _MOVES["pending"] = _MOVES["pending"], None
            handler(signum, None)


def defer_while_moving(handler):
    """`handler` (a signal handler) made to wait while outputs move into place: Python runs a
    handler between two statements of the main thread, which may be between two os.replace
    calls of one report."""

    def deferred(signum, frame):
        if _MOVES["depth"]:
            _MOVES["pending"] = (handler, signum)
            return
        handler(signum, frame)

    return deferred


def remove_own_staging() -> None:
    """Remove this process's staging folders (and the lock files it holds) now: for a SIGTERM
    handler, since the default action ends the process without unwinding the `finally` that
    would have removed them. A swap caught between its two renames gets its old folder back."""
    for old, destination in list(_OWN_SWAPS.items()):
        if old.exists() and not destination.exists():
            os.rename(old, destination)  # stopped between the two renames of a swap: the old folder goes back
        _OWN_SWAPS.pop(old, None)
    for stage in list(_OWN_STAGES):
        shutil.rmtree(stage, ignore_errors=True)
        _OWN_STAGES.discard(stage)
    for lock in list(_OWN_LOCKS):  # still ours (flocked until the process ends): no other run holds this file
        try:
            os.unlink(lock)
        except OSError:
            pass
        _OWN_LOCKS.discard(lock)


def _sibling(out_dir: Path, what: str) -> Path:
    return out_dir.with_name(f".{out_dir.name}.dcplace-{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.{what}")


def new_stage(out_dir: Path) -> Path:
    """A fresh staging folder beside `out_dir` (made with the umask, like any folder)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out_dir.parent, out_dir.name)
    stage = _sibling(out_dir, "tmp")
    _OWN_STAGES.add(stage)  # before it exists: a SIGTERM between the two still finds it
    os.mkdir(stage)
    return stage


def drop_stage(stage: Path) -> None:
    """Remove a staging folder from `new_stage` if it is still there (after a failure), and forget it."""
    shutil.rmtree(stage, ignore_errors=True)
    _OWN_STAGES.discard(stage)


@contextmanager
def staged_folder(out_dir: str | Path, kind: str) -> Iterator[Path]:
    """Write a whole `kind` folder into the yielded stage; on success it replaces `out_dir`
    (only a folder of the same kind that dcplace wrote, checked before and after)."""
    out_dir = check_destination(out_dir, kind)
    stage = new_stage(out_dir)
    try:
        yield stage
        write_marker(stage, kind, [p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file()])
        check_destination(out_dir, kind)  # the destination may have changed while we worked
        with _moving():
            if out_dir.exists():
                old = _sibling(out_dir, "old")
                _OWN_SWAPS[old] = out_dir
                os.rename(out_dir, old)
                os.rename(stage, out_dir)
                _OWN_SWAPS.pop(old, None)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(stage, out_dir)
    finally:
        drop_stage(stage)


@dataclass
class Stage:
    """A staging folder (`dir`); `moved` lists the files once placed in the destination."""

    dir: Path
    moved: list[Path] = field(default_factory=list)


@contextmanager
def staged_files(out_dir: str | Path, kind: str) -> Iterator[Stage]:
    """Write files into the yielded stage; on success each moves into `out_dir` (created, or a
    `kind` folder dcplace wrote) with os.replace, so a reader sees the old file or the new one;
    a SIGTERM while they move waits for the last (defer_while_moving), so a stopped run leaves
    all the old files or all the new ones."""
    out_dir = check_destination(out_dir, kind)
    stage = Stage(new_stage(out_dir))
    try:
        yield stage
        check_destination(out_dir, kind)
        out_dir.mkdir(exist_ok=True)
        if read_marker(out_dir) is None:
            write_marker(out_dir, kind)
        with _moving():
            for path in sorted(stage.dir.iterdir()):
                os.replace(path, out_dir / path.name)
                stage.moved.append(out_dir / path.name)
    finally:
        drop_stage(stage.dir)


def claim_folder(out_dir: str | Path, kind: str) -> Path:
    """Create (or reuse) a `kind` folder that several writes will fill over time (a batch)."""
    out_dir = check_destination(out_dir, kind)
    out_dir.mkdir(parents=True, exist_ok=True)
    if read_marker(out_dir) is None:
        write_marker(out_dir, kind)
    return out_dir


__all__ = ["OutputRefused", "OutputBusy", "ExclusiveLock", "destination_lock", "MARKER", "check_destination", "check_new_folder", "staged_folder", "staged_files", "Stage", "claim_folder", "remove_stale_staging", "remove_own_staging", "new_stage", "drop_stage", "defer_while_moving"]
