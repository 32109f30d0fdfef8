"""The ``git_status`` context source: the repository state the session starts from.

Branch, main branch, staged / unstaged / untracked changes and the last
``git_log_count`` commits of the repository holding the request's working directory,
at most ``git_max_chars`` characters (the change lists are cut first, with a note to
run ``git status``).  ``None`` outside a repository, without git, or when
``config.git_status`` is off.  The git user's name and e-mail are added only with
``config.git_user``, and the changed and untracked file names only with
``config.git_files`` (otherwise the status says how many there are): both say more
about the user and the machine than a model needs by default.

Git runs as a subprocess in the working directory, one command at a time with
``git_timeout_seconds`` each, never prompting (no terminal prompt, stdin closed), with
no pager and no colour, and without side effects on the repository: optional locks are
off (``git status`` then does not rewrite the index) and the fsmonitor hook is off (it
could start a daemon).  A command that fails or times out leaves its part out or says
so; it never raises.
"""

from __future__ import annotations

import os
import subprocess

from .base import SourceRequest

__all__ = ["GitStatusSource", "git_status_text"]

_GIT_OPTIONS = (
    "--no-pager",
    "--no-optional-locks",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "color.ui=false",
    "-c",
    "core.quotepath=false",
    "-c",
    "log.showSignature=false",
)
_STATUS_WORDS = {
    "M": "modified",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "type changed",
    "U": "unmerged",
}
INTRO = (
    "Git status of the working directory when this context was assembled (a snapshot: "
    "it is not updated as you work)."
)


class _Timeout(Exception):
    """A git command outlived its time limit."""


def _git(cwd: str, timeout: float, *args: str) -> str | None:
    """Stdout of ``git ARGS`` in ``cwd``, or ``None`` if it failed (``_Timeout`` if slow)."""
    env = dict(os.environ)
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GCM_INTERACTIVE="never")
    try:
        done = subprocess.run(
            ["git", *_GIT_OPTIONS, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _Timeout from None
    except OSError:  # git not installed, cwd gone or not a directory
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace")


def _changes(porcelain: str) -> tuple[list[str], list[str], list[str]]:
    """Staged, unstaged and untracked lines from ``git status --porcelain=v1 -z``."""
    staged: list[str] = []
    unstaged: list[str] = []
    untracked: list[str] = []
    entries = porcelain.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        x, y, path = entry[0], entry[1], entry[3:]
        if x in "RC":  # a rename or copy is followed by the path it came from
            origin = entries[i] if i < len(entries) else ""
            i += 1
            path = f"{origin} -> {path}" if origin else path
        if x == "?":
            untracked.append(f"  {path}")
            continue
        if x == "!":
            continue
        if x != " ":
            staged.append(f"  {_STATUS_WORDS.get(x, x)}: {path}")
        if y != " ":
            unstaged.append(f"  {_STATUS_WORDS.get(y, y)}: {path}")
    return staged, unstaged, untracked


def _main_branch(cwd: str, timeout: float) -> str:
    remote = _git(cwd, timeout, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if remote and remote.strip():
        return remote.strip().removeprefix("origin/")
    refs = ("refs/heads/main", "refs/heads/master")
    local = _git(cwd, timeout, "for-each-ref", "--format=%(refname:short)", *refs)
    names = (local or "").split()
    for name in ("main", "master"):
        if name in names:
            return name
    return "(none found: no origin/HEAD, main or master)"


def git_status_text(
    cwd: str,
    *,
    max_chars: int,
    log_count: int,
    timeout: float,
    user: bool = False,
    files: bool = False,
) -> str | None:
    """The status text of the repository holding ``cwd`` (see the module docstring);
    ``user`` adds the git user, ``files`` the changed and untracked file names."""
    try:
        inside = _git(cwd, timeout, "rev-parse", "--is-inside-work-tree")
    except _Timeout:
        return None
    if inside is None or inside.strip() != "true":
        return None
    head: list[str] = [INTRO]
    lists: list[str] = []
    tail: list[str] = []
    try:
        branch = (_git(cwd, timeout, "branch", "--show-current") or "").strip()
        if not branch:
            short = (_git(cwd, timeout, "rev-parse", "--short", "HEAD") or "").strip()
            branch = f"(detached HEAD at {short})" if short else "(unknown)"
        head.append(f"Current branch: {branch}")
        head.append(
            f"Main branch (the usual target of pull requests): {_main_branch(cwd, timeout)}"
        )
        if user:
            name = (_git(cwd, timeout, "config", "--get", "user.name") or "").strip()
            email = (_git(cwd, timeout, "config", "--get", "user.email") or "").strip()
            who = f"{name} <{email}>" if name and email else name or email or "(not configured)"
            head.append(f"Git user: {who}")
    except _Timeout:
        head.append(f"(git did not answer within {timeout:g}s; run `git status` yourself)")
        return "\n".join(head)[:max_chars]
    try:
        porcelain = _git(cwd, timeout, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
    except _Timeout:
        porcelain = None
        lists.append(f"Status: git status did not finish within {timeout:g}s; run `git status`.")
    if porcelain is not None:
        staged, unstaged, untracked = _changes(porcelain)
        if not (staged or unstaged or untracked):
            lists.append("Status: clean (no staged, unstaged or untracked changes)")
        elif not files:
            lists.append(
                f"Status: {len(staged)} staged, {len(unstaged)} unstaged and "
                f"{len(untracked)} untracked (run `git status` for the files)"
            )
        for title, lines in (
            ()
            if not files
            else (
                ("Staged changes", staged),
                ("Unstaged changes", unstaged),
                ("Untracked files", untracked),
            )
        ):
            if lines:
                lists.append(f"{title}:")
                lists.extend(lines)
    if log_count:
        try:
            log = _git(cwd, timeout, "log", f"-n{log_count}", "--format=%h %s")
        except _Timeout:
            log = None
        tail.append("Recent commits:")
        tail.extend(f"  {line}" for line in (log or "").splitlines())
        if not log:
            tail.append("  (none yet)")
    return _fit(head, lists, tail, max_chars)


NOTE = "  … (cut to fit; run `git status` for the full list)"


def _fit(head: list[str], lists: list[str], tail: list[str], max_chars: int) -> str:
    """Join the parts, cutting the change lists (then the rest) to ``max_chars``."""
    text = "\n".join([*head, *lists, *tail])
    if len(text) <= max_chars:
        return text
    fixed = len("\n".join([*head, NOTE, *tail])) + 1  # the note takes the lists' place
    kept: list[str] = []
    used = 0
    for line in lists:
        if fixed + used + len(line) + 1 > max_chars:
            break
        kept.append(line)
        used += len(line) + 1
    text = "\n".join([*head, *kept, NOTE, *tail])
    if len(text) <= max_chars:
        return text
    # Even without the lists it is too long (very long commit subjects): cut the end.
    return text[: max_chars - len(NOTE) - 1].rstrip() + "\n" + NOTE


class GitStatusSource:
    """The git status of the working directory's repository (see the module docstring)."""

    name = "git_status"

    def collect(self, request: SourceRequest) -> str | None:
        """The status text, or ``None`` when off or not in a repository."""
        cfg = request.config
        if not cfg.git_status:
            return None
        return git_status_text(
            request.working_directory,
            max_chars=cfg.git_max_chars,
            log_count=cfg.git_log_count,
            timeout=cfg.git_timeout_seconds,
            user=cfg.git_user,
            files=cfg.git_files,
        )
