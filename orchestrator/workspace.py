"""The one module that runs git (DESIGN.md, "The experiment workspace"; STYLE.md point 7).

An experiment's workspace is a git repository: agents and people commit to `main`, the gate moves
`refs/eau/live` to the last accepted commit, writes a verdict note under `refs/notes/eau` on every
commit it judges, and reverts rejected commits with a commit of its own. Everything here is git
plumbing (object reads, `commit-tree`, `update-ref`, a temporary index), never a checkout of ours,
so an agent editing files in the workspace at the same time is never disturbed. The commands run
as plain `git` subprocesses: the pre-commit hook starts this module in a fresh Python, where
importing GitPython cost more than the handful of commands (benchmarks/gate_bench.py); `repo`
still hands out a GitPython `Repo` to callers that want its object model.

Quirks worked around (cited where they are handled):
- `git notes add` refuses to overwrite an existing note and needs an identity for the notes commit.
- `core.hooksPath` in a person's global config silently disables `.git/hooks`.
- `git merge-tree --merge-base` needs git 2.40; this machine has 2.39, so a commit's own change is
  re-applied on the live tree with `git apply --cached --3way` on a temporary index instead
  (`--3way` lets a writer's fix of its own rejected line apply where the live tree agrees).
- `os.rename` onto a non-empty folder fails (ENOTEMPTY), so exports swap folders in two renames.
- A second git process holding `index.lock` makes index commands fail: they are retried briefly.
- `rev-parse` answers inside any sub-folder of another repository, so a --workspace must be the
  top of its own repository.
- `Repo.tree(sha)` in GitPython leaves the root tree's path unset (`tree / "a/b"` fails); one
  reason reads go through `ls-tree -z` / `cat-file` instead.
- `_run` hands git the whole inherited environment on purpose: inside a hook git sets
  `GIT_INDEX_FILE` to the index being committed (`.git/index.lock` under `git commit -a`, a
  `.git/next-index-*.lock` under `git commit PATHS`, seen with git 2.39), and `staged_tree` must
  read that index to judge what is about to be committed; a cleaned environment would judge
  `.git/index`. Callers add variables (`env=`), never remove one.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UserError

MAIN = "refs/heads/main"
LIVE_REF = "refs/eau/live"
JUDGED_REF = "refs/eau/judged"          # last commit on main the gate judged (rewrite detection)
NOTES_REF = "refs/notes/eau"
GATE_IDENTITY = ("EAU gate", "gate@eau.local")
ORCHESTRATOR_IDENTITY = ("EAU orchestrator", "orchestrator@eau.local")   # its own workspace commits
AGENT_EMAIL_SUFFIX = "@agents.eau"
SYMLINK_MODE = 0o120000
SUBMODULE_MODE = 0o160000
_HEX40 = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parent: str | None          # first parent (None for a root commit)
    tree: str
    message: str
    author_name: str
    author_email: str

    def trailers(self) -> dict[str, str]:
        """`Key: value` lines of the message (last one wins), e.g. Eau-Agent, Why, Expect."""
        return parse_trailers(self.message)


def parse_trailers(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def identity_env(name: str, email: str) -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}


class GitError(RuntimeError):
    """A git command failed (not the user's fault as far as we know)."""

    def __init__(self, args: list[str], returncode: int, stderr: str):
        super().__init__(f"{' '.join(args[:3])} failed ({returncode}): {stderr.strip()[:500]}")
        self.returncode, self.stderr = returncode, stderr


class Workspace:
    """A workspace repository (non-bare, `main` checked out where agents edit).

    Plain git plumbing through subprocess: a git hook runs this module in a fresh process, and
    importing GitPython there costs more than the few commands it needs (benchmarks/gate_bench.py).
    `repo` gives a GitPython `Repo` to callers that want one."""

    def __init__(self, path: Path | str):
        self.path = Path(path).resolve()
        lines: list[str] = []
        if self.path.is_dir():
            top = subprocess.run(["git", "rev-parse", "--show-toplevel", "--absolute-git-dir"],
                                 cwd=self.path, capture_output=True, text=True)
            lines = top.stdout.splitlines() if top.returncode == 0 else []
        # rev-parse also answers inside a sub-folder of another repository: insist on the top.
        if len(lines) < 2 or Path(lines[0]).resolve() != self.path:
            raise UserError(f"{self.path} is not a git repository: pass a folder made with "
                            f"`git init`, or leave --workspace out to seed a new one.")
        self.git_dir = Path(lines[1]).resolve()
        self._trees: dict[str, str] = {}
        self._files: dict[str, dict[str, tuple[int, str]]] = {}

    @property
    def repo(self):
        import git                    # GitPython, for callers that want its object model
        return git.Repo(self.path)

    # -- creation -----------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, seed_dir: Path, message: str) -> "Workspace":
        """A new repository at `path` holding a copy of `seed_dir`, committed once on main."""
        path.mkdir(parents=True, exist_ok=False)
        shutil.copytree(seed_dir, path, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git"))
        subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
        ws = cls(path)
        ws.run("add", "-A")
        ws.run("commit", "-q", "--no-verify", "-m", message,
               env=identity_env(*ORCHESTRATOR_IDENTITY))
        return ws

    def install_hooks(self, scripts: dict[str, str], missing_only: bool = False) -> None:
        """Write hook scripts (name -> text) into this repository's hooks folder; with
        `missing_only`, only those not there yet (an older experiment gaining a new hook)."""
        hooks = self.git_dir / "hooks"

        def ours(target: Path) -> bool:
            return target.exists() and "orchestrator.gate" in target.read_text(errors="replace")

        todo = {n: t for n, t in scripts.items() if not (missing_only and ours(hooks / n))}
        if not todo:
            return
        hooks.mkdir(exist_ok=True)
        for name, text in todo.items():
            target = hooks / name
            if target.exists() and not ours(target):
                target.rename(target.with_name(name + ".before-eau"))   # keep a person's own hook
            target.write_text(text)
            target.chmod(0o755)
        # A global core.hooksPath would silently bypass .git/hooks: pin it in the local config.
        self.run("config", "core.hooksPath", str(hooks))

    def show_notes_in_log(self) -> None:
        """Make plain `git log` show the gate's verdict notes: git reads only refs/notes/commits
        unless `notes.displayRef` names more (git-config(1)); added once, beside any the person
        set, since `git config KEY VALUE` refuses to overwrite a key with several values."""
        shown = self.run("config", "--get-all", "notes.displayRef", check=False).split()
        if NOTES_REF not in shown:
            self.run("config", "--add", "notes.displayRef", NOTES_REF)

    # -- plumbing -----------------------------------------------------------------------------
    def run(self, *args: str, env: dict | None = None, input: str | None = None,
            check: bool = True) -> str:
        """Run one git command in this repository; returns stdout (stripped of the final newline)."""
        return self._run(list(args), env, input.encode() if input is not None else None,
                         check).decode(errors="replace").rstrip("\n")

    def _run(self, args: list[str], env: dict | None, input: bytes | None, check: bool) -> bytes:
        full_env = {**os.environ, **(env or {})}
        for attempt in range(20):
            proc = subprocess.run(["git", *args], cwd=self.path, env=full_env, input=input,
                                  capture_output=True)
            stderr = proc.stderr.decode(errors="replace")
            # Another git process holding index.lock: wait and retry (the agent may be committing).
            if proc.returncode != 0 and "index.lock" in stderr and attempt < 19:
                time.sleep(0.1)
                continue
            break
        if check and proc.returncode != 0:
            raise GitError(["git", *args], proc.returncode, stderr)
        return proc.stdout

    def rev(self, ref: str) -> str | None:
        """The commit `ref` names, or None when it does not exist."""
        out = self.run("rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
        return out or None

    def main(self) -> str | None:
        return self.rev(MAIN)

    def info(self, sha: str) -> CommitInfo:
        out = self.run("show", "-s", "--format=%H%x00%P%x00%T%x00%an%x00%ae%x00%B", sha)
        full, parents, tree, name, email, message = out.split("\x00", 5)
        return CommitInfo(sha=full, parent=parents.split()[0] if parents.split() else None,
                          tree=tree, message=message, author_name=name, author_email=email)

    def tree_of(self, treeish: str) -> str:
        """The tree of a commit or tree; cached for object ids (they never change, refs do)."""
        cached = self._trees.get(treeish)
        if cached is None:
            cached = self.run("rev-parse", f"{treeish}^{{tree}}")
            if _HEX40.fullmatch(treeish):
                self._trees[treeish] = cached
        return cached

    def read_file(self, treeish: str, path: str) -> bytes | None:
        """A file's bytes at a commit or tree, or None when absent (or not a file)."""
        entry = self.list_files(treeish).get(path)
        if entry is None or entry[0] == SUBMODULE_MODE:
            return None
        return self._run(["cat-file", "blob", entry[1]], None, None, True)

    def list_files(self, treeish: str) -> dict[str, tuple[int, str]]:
        """path -> (mode, object sha) of every blob and submodule in the tree (cached per tree)."""
        tree = self.tree_of(treeish)
        if tree not in self._files:
            out = self._run(["ls-tree", "-r", "-z", "--full-tree", tree], None, None, True)
            files = {}
            for entry in out.decode(errors="surrogateescape").split("\0"):
                if entry:
                    meta, path = entry.split("\t", 1)
                    mode, _kind, sha = meta.split()
                    files[path] = (int(mode, 8), sha)
            self._files[tree] = files
        return self._files[tree]

    def changed_paths(self, old: str, new: str) -> dict[str, str]:
        """path -> "added" | "modified" | "deleted" between two trees/commits."""
        a, b = self.list_files(old), self.list_files(new)
        out = {p: "added" for p in b if p not in a}
        out.update({p: "deleted" for p in a if p not in b})
        out.update({p: "modified" for p in a if p in b and a[p] != b[p]})
        return dict(sorted(out.items()))

    def diff(self, old: str, new: str) -> str:
        return self.run("diff", "--no-color", old, new)

    def first_parent_history(self, ref: str = MAIN) -> list[str]:
        """Commits of `ref` newest first, following first parents only (merges count once)."""
        out = self.run("rev-list", "--first-parent", ref, check=False)
        return out.split() if out else []

    def commits_since(self, base: str | None, ref: str = MAIN) -> list[str]:
        """Commits on `ref` after `base`, oldest first, first-parent order."""
        spec = [ref] if base is None else [f"{base}..{ref}"]
        out = self.run("rev-list", "--first-parent", "--reverse", *spec)
        return out.split() if out else []

    def is_ancestor(self, a: str, b: str) -> bool:
        return subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=self.path,
                              capture_output=True).returncode == 0

    # -- refs, tags, notes --------------------------------------------------------------------
    def set_ref(self, name: str, sha: str, expect_old: str | None = None) -> bool:
        """Point `name` at `sha`; with `expect_old`, only if it still points there (atomic)."""
        args = ["update-ref", name, sha] + ([expect_old] if expect_old else [])
        try:
            self.run(*args)
            return True
        except GitError:
            return False

    def tag(self, name: str, sha: str) -> None:
        self.set_ref(f"refs/tags/{name}", sha)

    def add_note(self, sha: str, text: str) -> None:
        # `git notes add` refuses an existing note without -f, and needs a committer identity.
        self.run("notes", f"--ref={NOTES_REF}", "add", "-f", "-m", text, sha,
                 env=identity_env(*GATE_IDENTITY))

    def note(self, sha: str) -> str | None:
        out = self.run("notes", f"--ref={NOTES_REF}", "show", sha, check=False)
        return out or None

    def noted_commits(self) -> set[str]:
        out = self.run("notes", f"--ref={NOTES_REF}", "list", check=False)
        return {line.split()[1] for line in out.splitlines() if len(line.split()) == 2}

    # -- building commits without a checkout --------------------------------------------------
    def apply_change_on(self, base: str, parent: str, commit: str) -> str | None:
        """The tree of `base` with the change `parent -> commit` applied, or None on a conflict.

        git 2.39 lacks `merge-tree --merge-base` (2.40), so the change is applied as a patch on
        a temporary index holding `base`'s tree (`git apply --cached` never touches files);
        `--3way` falls back on the blobs the patch names (--full-index) when context differs."""
        patch = self.run("diff", "--binary", "--full-index", parent, commit)
        if not patch:
            return self.tree_of(base)
        with tempfile.TemporaryDirectory(prefix="eau-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run("read-tree", base, env=env)
            try:
                self.run("apply", "--cached", "--3way", "--whitespace=nowarn", env=env, input=patch + "\n")
            except GitError:
                return None
            return self.run("write-tree", env=env)

    def commit_tree(self, tree: str, parent: str, message: str,
                    identity: tuple[str, str] = GATE_IDENTITY) -> str:
        return self.run("commit-tree", tree, "-p", parent, "-m", message, env=identity_env(*identity))

    def commit_file(self, path: str, data: bytes, message: str,
                    identity: tuple[str, str]) -> str | None:
        """A commit on top of main that changes one file to `data`, built on a temporary index
        (no `git add`: a session's or a person's uncommitted edits in the checkout stay out of
        it, and stay in place); main advances only if it has not moved meanwhile (None then)."""
        head = self.main()
        if head is None:
            return None
        blob = self._run(["hash-object", "-w", "--stdin"], None, data, True).decode().strip()
        with tempfile.TemporaryDirectory(prefix="eau-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run("read-tree", head, env=env)
            self.run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = self.run("write-tree", env=env)
        sha = self.commit_tree(tree, head, message, identity)
        return sha if self.advance_main(sha, head) else None

    def advance_main(self, new: str, old: str) -> bool:
        """Move main from `old` to `new` (compare-and-swap) and bring the checkout along.

        Returns False when main moved meanwhile (a new commit landed: the caller judges again).
        The index and files follow with a two-way `read-tree -m -u`, which keeps a person's
        unrelated uncommitted edits and refuses to overwrite conflicting ones (then only main moves
        and `git status` shows the difference)."""
        if not self.set_ref(MAIN, new, old):
            return False
        if self.run("symbolic-ref", "-q", "HEAD", check=False) == MAIN and \
                self.run("rev-parse", "--is-bare-repository") == "false":
            self.run("read-tree", "-m", "-u", old, new, check=False)
        return True

    def staged_tree(self) -> str:
        """The tree of the index (in a pre-commit hook: what is about to be committed)."""
        return self.run("write-tree")

    def commit_all(self, message: str, identity: tuple[str, str], verify: bool = True) -> str:
        """Stage everything and commit on the current branch (tests, adapters, people's tools).
        verify=False runs no hook at all, as a plumbing commit would: `--no-verify` skips only
        pre-commit and commit-msg, and the post-commit hook would judge the commit at once."""
        self.run("add", "-A")
        hooks = [] if verify else ["-c", "core.hooksPath=/dev/null"]
        args = [*hooks, "commit", "-q", "-m", message] + ([] if verify else ["--no-verify"])
        self.run(*args, env=identity_env(*identity))
        return self.rev("HEAD")

    def export_tree(self, treeish: str, dest: Path) -> Path:
        """Write a commit's files into `dest` atomically: a temporary folder, then renames."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        for path, (mode, sha) in self.list_files(treeish).items():
            if mode in (SYMLINK_MODE, SUBMODULE_MODE):
                continue                 # never follow links out of the snapshot
            target = tmp / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self._run(["cat-file", "blob", sha], None, None, True))
            if mode & 0o111:
                target.chmod(0o755)
        # os.rename onto a non-empty folder fails (ENOTEMPTY): move the old one aside first.
        old = None
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}-{time.monotonic_ns()}")
            os.rename(dest, old)
        os.rename(tmp, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return dest


def author_kind(info: CommitInfo) -> str:
    """"agent", "orchestrator" (the gate's and the orchestrator's own commits: the seed, reverts,
    switch-offs) or "person"."""
    if is_agent_author(info):
        return "agent"
    if info.author_email in (GATE_IDENTITY[1], ORCHESTRATOR_IDENTITY[1]):
        return "orchestrator"
    return "person"


def is_agent_author(info: CommitInfo) -> bool:
    """Agents commit with `Eau-Agent:` / `Eau-Session:` trailers and an @agents.eau email."""
    t = info.trailers()
    return ("Eau-Agent" in t or "Eau-Session" in t
            or info.author_email.lower().endswith(AGENT_EMAIL_SUFFIX))
