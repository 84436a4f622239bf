"""The sandbox settings of a run (`Isolation`), resolved on the machine that runs the target.

What a repository declares (`sandbox.caches`, `sandbox.read_only`, `sandbox.env`) is only asked:
`jobs.guard.declared_paths` says what may be granted, this module grants it on this machine.

- A declared cache is seen by target code at its declared path, but backed by
  `<cache root>/repos/<repo key>/<arm>/<that path under the root>`: one repository never sees
  another's caches, and the baseline's builds (arm `base`) never see what a candidate's build
  wrote (arm `candidate`), so a candidate cannot poison the baseline's cache to win.
- A backing is made, chowned and bound through descriptors walked without following a link
  (`jobs.guard.cachedirs`): what a build left in its cache can never redirect where a later cache of
  the same repository is made or bound (issue 41, A1). Declarations that overlap are refused.
- The compiler cache (issue 43): where the operator allows it (`jobs.guard.operator.compiler_cache`),
  build steps, and only they, see an implicit cache at `<cache root>/ccache`, backed per
  repository and arm like a declared one, with `CCACHE_DIR` naming it, `CCACHE_BASEDIR` the tree
  (two folders of one repository share hits) and ccache's compiler masquerade first on `PATH`.
- A root worker runs each repository's target code as that repository's own uid
  (`jobs.guard.tenants`), so no two repositories share a process limit or an owner of their files.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

from jobs.guard import cachedirs, declared_paths, operator, sandbox, tenants
from jobs.guard.limits import Limits
from jobs.contract.spec import SandboxSpec


class IsolationError(ValueError):
    """A declared sandbox path is not allowed or not there; the message says which and why."""


NAMESPACES = "repos"           # <cache root>/repos/<repo key>/<arm>/<declared path under the root>
CCACHE = "ccache"              # the compiler cache's view: <cache root>/ccache (backed like a declared cache)
ARMS = ("base", "candidate")


def repo_key(identity: str) -> str:
    """The folder name of one repository's cache namespace (identity: `owner/name`, or a path)."""
    return hashlib.sha256(identity.encode()).hexdigest()[:24]


def _cache_root() -> Path:
    return sandbox.cache_root().expanduser().resolve()


def backings(view: str | Path) -> list[Path]:
    """Every repository's and arm's folder behind the declared cache `view` (for an operator
    looking for what a cache holds, e.g. `~/.cache/autoresearch/ccache`)."""
    root = _cache_root()
    rel = Path(view).expanduser().parent.resolve().joinpath(Path(view).name).relative_to(root)
    return sorted(p for p in (root / NAMESPACES).glob(f"*/*/{rel}") if p.is_dir() and not p.is_symlink())


@dataclass(frozen=True)
class Isolation:
    """The sandbox settings of a run (see the module's docstring)."""

    enabled: bool = True
    caches: tuple[str, ...] = ()          # declared (view) paths, resolved, under the cache root
    read_only: tuple[str, ...] = ()
    env: tuple[str, ...] = ()             # the names target code gets (already operator-allowed)
    namespace: str = ""                   # this repository's folder under <root>/repos
    limits: Limits = Limits()
    arm: str = "candidate"                # for steps whose caller does not say
    ccache: str = ""                      # ccache's compiler masquerade folder; '' = no compiler cache

    @classmethod
    def from_spec(cls, spec: SandboxSpec, protect: tuple[str | Path, ...] = ()) -> "Isolation":
        """Resolve and check the declared paths (`jobs.guard.declared_paths`): under the cache root, never
        the root itself, never its namespaces, never anything that is, contains or lies in a
        protected path (the run's tree, its out folder, the App's workdir; `protect` adds to the
        spec's own) or a secret file of the operator's (the spec's, and every path `sandbox.hide`
        masks in this process, so no caller can forget the App's key), never overlapping each other.
        Then make each cache's backings (a root worker: owned by the repository's uid)."""
        root = _cache_root()
        spaces = root / NAMESPACES
        guarded = [str(Path(p).expanduser().resolve()) for p in (*spec.protect, *protect) if p]
        secrets = [str(Path(p).expanduser().resolve()) for p in (*spec.secrets, *sandbox.hidden()) if p]
        limits = Limits.from_dict(spec.limits)
        key = spec.repo_key or repo_key("unnamed")
        resolved: dict[str, list[str]] = {"caches": [], "read_only": []}
        for kind in resolved:
            for raw in getattr(spec, kind):
                path = Path(raw).expanduser()
                real = (path.parent.resolve() / path.name) if kind == "caches" else path.resolve()
                if kind == "read_only" and not path.exists():
                    raise IsolationError(f"sandbox.{kind}: {raw} does not exist on this machine")
                why = declared_paths.refusal(kind, raw, str(real), root=str(root), namespaces=str(spaces),
                                             protected=guarded, secrets=secrets)
                if why:
                    raise IsolationError(why)
                resolved[kind].append(str(real))
        why = declared_paths.overlap(resolved["caches"], resolved["read_only"])
        if why:
            raise IsolationError(why)
        if os.geteuid() == 0 and spec.enabled:
            try:
                limits = replace(limits, sandbox_uid=tenants.uid_for(key, spaces, limits.uid_first, limits.uid_last))
            except (tenants.TenantError, OSError) as exc:
                raise IsolationError(f"no sandbox uid for this repository: {exc}") from None
        try:
            masquerade = operator.compiler_cache()
        except operator.OperatorError as exc:
            raise IsolationError(str(exc)) from None
        view = str(root / CCACHE)
        if masquerade and view not in resolved["caches"] and declared_paths.overlap(
                [*resolved["caches"], view], resolved["read_only"]):
            masquerade = ""          # the repository declared something over it: its caches, as it asked
        isolation = cls(spec.enabled, tuple(resolved["caches"]), tuple(resolved["read_only"]), tuple(spec.env),
                        str(spaces / key), limits, ccache=masquerade)
        for view in isolation.caches + ((isolation.ccache_view(),) if masquerade else ()):
            with contextlib.suppress(OSError):      # the mount point, for a root under a read-only system dir
                Path(view).mkdir(parents=True, exist_ok=True)
            for arm in ARMS:
                isolation._make_backing(view, arm)
        return isolation

    def _make_backing(self, view: str, arm: str) -> None:
        base = self.arm_base(arm)
        try:
            Path(base).mkdir(parents=True, exist_ok=True)       # the operator's own folders
            fd = cachedirs.open_beneath(base, self.relative(view), create=True)
        except (OSError, cachedirs.CacheDirError) as exc:
            raise IsolationError(f"sandbox.caches: {view}: cannot make its backing for the {arm} arm "
                                 f"({exc})") from None
        try:
            if os.geteuid() == 0:       # a root worker's steps run as the repository's uid (jobs.guard.tenants)
                cachedirs.give(fd, self.limits.sandbox_uid)
        finally:
            os.close(fd)

    def arm_base(self, arm: str) -> str:
        """The folder under which this repository's caches for `arm` are kept."""
        return str(Path(self.namespace) / arm)

    def relative(self, view: str) -> str:
        """`view` below the cache root this isolation was resolved against (`namespace`'s root)."""
        return str(Path(view).relative_to(Path(self.namespace).parents[1]))

    def backing(self, view: str, arm: str) -> str:
        """Where the cache target code sees at `view` is kept for `arm` of this repository."""
        return str(Path(self.arm_base(arm)) / self.relative(view))

    def ccache_view(self) -> str:
        """Where build steps see the compiler cache (its backing: `backing(view, arm)`)."""
        return str(Path(self.namespace).parents[1] / CCACHE)

    def build_env(self, tree: Path, step: str, arm: str | None = None, path: str = "") -> dict[str, str]:
        """What a build step's environment gets for the compiler cache ({} for any other step, or
        without one): `CCACHE_DIR` (the view in a sandbox, the backing itself without one),
        `CCACHE_BASEDIR` the tree, and ccache's masquerade before `path` (the step's PATH)."""
        if step != "build" or not self.ccache or not self.namespace:
            return {}
        view = self.ccache_view()
        where = view if self.enabled else self.backing(view, arm or self.arm)
        return {"CCACHE_DIR": where, "CCACHE_BASEDIR": str(Path(tree).resolve()),
                "PATH": ":".join(p for p in (self.ccache, path or sandbox.DEFAULT_PATH) if p)}

    def policy(self, tree: Path, step: str, extra_env: dict[str, str] | None = None,
               arm: str | None = None) -> sandbox.Policy | None:
        """`step`: build | checks | benchmark; `arm`: base | candidate, whose caches it sees. The
        benchmark gets nothing writable but its /tmp and $HOME, both fresh: no benchmark process
        can leave anything for the next one. A cache is bound from a descriptor the sandbox opens
        below the arm's folder without following a link (`Mount.base`)."""
        if not self.enabled:
            return None
        writable = step != "benchmark"
        home = str(Path.home())
        arm = arm or self.arm
        mounts = tuple(sandbox.Mount(p, writable=writable, source=self.relative(p), base=self.arm_base(arm))
                       for p in self.caches)
        mounts += tuple(sandbox.Mount(p) for p in self.read_only)
        env = sandbox.environment(self.env, extra_env, home=home)
        ccache = self.build_env(tree, step, arm, env.get("PATH", ""))
        if ccache and self.ccache_view() not in self.caches:
            view = self.ccache_view()
            mounts += (sandbox.Mount(view, writable=True, source=self.relative(view), base=self.arm_base(arm)),)
        env = {**env, **ccache, **(extra_env or {})}
        hidden = tuple(p + "/" if os.path.isdir(p) else p for p in sandbox.hidden() if os.path.exists(p))
        return sandbox.Policy(tree=Path(tree).resolve(), tree_writable=writable, mounts=mounts, home=home,
                              env=env, hidden=hidden, limits=self.limits)


DEFAULT_ISOLATION = Isolation()
