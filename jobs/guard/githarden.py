"""How every git process of the worker, the CLI and the App is started, so that git runs no program a
repository controls. Pure: argv and environment in, argv and environment out; the adapter that
runs git (jobs/guard/gitops.py, bot/gitclone.py) does the I/O.

Where git finds a program to run, and what closes each door:

- hooks (`.git/hooks/*`, `core.hooksPath`): `-c core.hooksPath=/dev/null`; git looks for
  `/dev/null/<hook>`, which cannot exist, so no hook runs, wherever a build may have planted one;
- `core.fsmonitor`, `core.editor`, `sequence.editor`, `core.pager`, `core.askPass`,
  `core.sshCommand`, `credential.helper` (an empty value empties the helper list), signing
  (`gpg.*` only runs when signing is on): each forced on the command line (`FORCED`), which
  outranks every config file; the environment is built afresh (`environment`), so no
  `GIT_SSH_COMMAND`, `GIT_EXTERNAL_DIFF`, `GIT_CONFIG_PARAMETERS`, `GIT_DIR` of the caller leaks in;
- system and global config (`/etc/gitconfig`, `~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`):
  not read (`GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL` = `/dev/null` or a file the operator
  names in AUTORESEARCH_GIT_CONFIG); `HOME=/dev/null`, so nothing under a home is read either
  (`.netrc`, `~/.config/git/attributes`);
- keys the command line cannot switch off because their names are free (`filter.<driver>.*`,
  `diff.<driver>.textconv`/`command`, `merge.<driver>.driver`, `diff.external`, `include.path`,
  `includeIf.*`, `core.alternateRefsCommand`, `trailer.*.command`, newer git's `hook.*`): the
  repository's own config must not hold them
  (`unsafe_keys`); the adapter checks the config files git would read before it runs git there.
  `.gitattributes` in a tree can only name a driver; without a configured driver it runs nothing;
- transports: only https, http and local files (`protocol.allow=never` plus those three), so no
  `ext::` command, no ssh, no remote helper a config names; submodules are never recursed into;
- a `.git` file or folder written by target code in a worktree: commands in worktrees the worker
  made get `--git-dir`/`--work-tree` of the real repository (`command(..., git_dir=, work_tree=)`),
  so git never follows the tree's own `.git`;
- background work that would outlive the call (`gc --auto`, maintenance): off.

`safe.directory` is never set here: git's ownership check for repositories it discovers stays on.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

NOWHERE = "/dev/null"          # a path under which nothing can exist (hooks, home, global config)

FORCED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", NOWHERE),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.editor", ":"),                 # ':' is git's own "no editor"
    ("sequence.editor", ":"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),         # and ssh is not an allowed protocol anyway
    ("core.attributesFile", NOWHERE),
    ("core.useReplaceRefs", "false"),     # what is measured is the commit's own content
    ("credential.helper", ""),            # empties the list; a caller may append its own after
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),
    ("protocol.https.allow", "always"),
    ("protocol.http.allow", "always"),
    ("protocol.file.allow", "always"),
    ("protocol.ext.allow", "never"),
    ("protocol.ssh.allow", "never"),
    ("protocol.git.allow", "never"),
)

# Config keys (as `git config --list` prints them: section and key lower case) that name a program
# and that no `-c` can switch off. A repository config holding one is refused, not obeyed.
_UNSAFE = re.compile(r"""^(?:
      filter\..+
    | diff\.external
    | diff\..+\.(?:command|textconv)
    | merge\..+\.driver
    | include\.path
    | includeif\..+
    | core\.alternaterefscommand
    | core\.gitproxy
    | uploadpack\.packobjectshook
    | trailer\..+\.(?:command|cmd)
    | hook\..+                       # config-defined hooks of newer git
)$""", re.X | re.S)


def unsafe_keys(names: Iterable[str]) -> list[str]:
    """The config keys among `names` that would make git run a program the config names."""
    return sorted({n for n in names if _UNSAFE.match(n.lower())})


def command(args: Sequence[str], *, git_dir: str | None = None, work_tree: str | None = None,
            cwd: str | None = None, config: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The argv of one hardened git process running `args`: `FORCED`, then the caller's extra
    `config` (later `-c` wins), then either explicit `--git-dir`/`--work-tree` or `-C cwd`."""
    argv = ["git", "--no-pager"]
    for key, value in (*FORCED, *config):
        argv += ["-c", f"{key}={value}"]
    if git_dir is not None:
        argv.append(f"--git-dir={git_dir}")
        if work_tree is not None:
            argv.append(f"--work-tree={work_tree}")
    if cwd is not None:
        argv += ["-C", cwd]
    return argv + list(args)


def environment(inherited: Mapping[str, str], *, global_config: str = NOWHERE,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """git's whole environment: nothing of `inherited` but PATH and the locale; no config but
    the repository's own and `global_config`; no prompt, editor, pager or replacement object."""
    env = {"PATH": inherited.get("PATH", "/usr/bin:/bin"), "HOME": NOWHERE, "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": global_config,
           "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "GIT_EDITOR": ":",
           "GIT_SEQUENCE_EDITOR": ":", "GIT_PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1",
           "GIT_PROTOCOL_FROM_USER": "0", "GIT_OPTIONAL_LOCKS": "0"}
    env.update(extra or {})
    return env


def gitfile_target(text: str) -> str | None:
    """The path a worktree's `.git` file names (`gitdir: <path>`), or None if it is not one."""
    m = re.fullmatch(r"gitdir: (.+)\n?", text)
    return m.group(1) if m else None
