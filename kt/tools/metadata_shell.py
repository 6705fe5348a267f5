"""The shell of `kt metadata shell`: browse a replayed metadata image like kafka-metadata-shell.

The image is a tree of directories and files (kafka-metadata-shell's 3.5+ layout,
`MetadataImage.to_tree`). Commands: ls, cd, cat, find, tree, pwd, history, help,
exit; paths are absolute or relative, with `.`, `..` and glob patterns (`*`, `?`,
`[...]`) in any component, as Kafka's shell allows.

With `as_json` every command prints NDJSON for scripts: one object per entry of `ls`
and `find`, per file of `cat`, per tree of `tree` (directories as objects, files as
strings), per line of `history`; `pwd` and `help` one object each. Errors stay text
on the error channel.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Node = dict[str, Any] | str

HELP = """\
Commands:
  ls [PATH...]     list a directory's children (or name a file)
  cd [PATH]        change the current directory (default /)
  cat PATH...      print files
  find [PATH...]   print every path under PATH (default: the current directory)
  tree [PATH...]   print the tree under PATH with the files' contents
  pwd              print the current directory
  history          print the commands typed so far
  help             this help
  exit             leave the shell (also quit, Ctrl-D)
Paths may be relative, use . and .., and glob patterns (* ? [...]).
The tree: /image/{provenance,features,cluster/{brokers,controllers},topics/{byName,byId},
configs,clientQuotas,producerIds,acls/byId,scram,delegationToken} and /local."""


class ShellError(Exception):
    """A command failed (its message is printed as `<command>: <message>`)."""


@dataclass
class Shell:
    """The state of one shell session over a tree."""

    root: dict[str, Any]
    cwd: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    out: Callable[[str], None] = print
    err: Callable[[str], None] = print  # where a failed command's message goes
    columns: bool = False  # ls prints in columns (interactive terminals)
    as_json: bool = False  # NDJSON output (see the module's docstring)

    # --- paths ---
    def _node(self, parts: list[str]) -> Node | None:
        node: Node = self.root
        for p in parts:
            if not isinstance(node, dict) or p not in node:
                return None
            node = node[p]
        return node

    def _normalize(self, path: str) -> list[str]:
        parts = [] if path.startswith("/") else list(self.cwd)
        for comp in path.split("/"):
            if comp in ("", "."):
                continue
            if comp == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(comp)
        return parts

    def resolve(self, path: str) -> list[list[str]]:
        """Every existing path `path` names (globs expanded), sorted; [] when none."""
        parts = self._normalize(path)
        found: list[list[str]] = [[]]
        for comp in parts:
            nxt: list[list[str]] = []
            for base in found:
                node = self._node(base)
                if not isinstance(node, dict):
                    continue
                if any(c in comp for c in "*?["):
                    nxt.extend([*base, n] for n in sorted(node) if fnmatch.fnmatchcase(n, comp))
                elif comp in node:
                    nxt.append([*base, comp])
            found = nxt
        return found

    @staticmethod
    def show(parts: list[str]) -> str:
        """A path as text."""
        return "/" + "/".join(parts)

    def emit(self, obj: dict[str, Any]) -> None:
        """One NDJSON line."""
        self.out(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))

    def entry(self, parts: list[str]) -> dict[str, Any]:
        """The JSON object naming one path: path, name and type (directory or file)."""
        kind = "directory" if isinstance(self._node(parts), dict) else "file"
        return {"path": self.show(parts), "name": parts[-1] if parts else "/", "type": kind}

    # --- commands ---
    def run(self, line: str) -> bool:
        """Run one command line; False when it failed. Raises SystemExit on exit."""
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            self.err(f"cannot parse the command: {exc}")
            return False
        if not argv:
            return True
        self.history.append(line)
        name, args = argv[0], argv[1:]
        handler = getattr(self, f"cmd_{name}", None)
        if name in ("exit", "quit"):
            raise SystemExit(0)
        if handler is None:
            self.err(f"{name}: unknown command (try help)")
            return False
        try:
            handler(args)
        except ShellError as exc:
            self.err(f"{name}: {exc}")
            return False
        return True

    def _targets(self, args: list[str], errors: list[str]) -> list[list[str]]:
        """The paths the arguments name (the cwd without any); misses go to `errors`."""
        if not args:
            return [list(self.cwd)]
        found: list[list[str]] = []
        for a in args:
            r = self.resolve(a)
            if not r:
                errors.append(f"{a}: no such file or directory")
            found.extend(r)
        return found

    @staticmethod
    def _raise(errors: list[str]) -> None:
        if errors:
            raise ShellError("; ".join(errors))

    def cmd_ls(self, args: list[str]) -> None:
        errors: list[str] = []
        targets = self._targets(args, errors)
        many = len(targets) > 1
        for i, t in enumerate(targets):
            node = self._node(t)
            if self.as_json:
                # The entries of a directory, or the file itself; the path says which.
                for child in [[*t, n] for n in sorted(node)] if isinstance(node, dict) else [t]:
                    self.emit(self.entry(child))
                continue
            if isinstance(node, dict):
                if many:
                    if i:
                        self.out("")
                    self.out(f"{self.show(t)}:")
                self._print_names(sorted(node))
            else:
                self.out(t[-1] if t else "/")
        self._raise(errors)

    def _print_names(self, names: list[str]) -> None:
        if not self.columns or not names:
            for n in names:
                self.out(n)
            return
        width = shutil.get_terminal_size((80, 24)).columns
        col = max(len(n) for n in names) + 2
        per_row = max(1, width // col)
        for i in range(0, len(names), per_row):
            self.out("".join(n.ljust(col) for n in names[i : i + per_row]).rstrip())

    def cmd_cd(self, args: list[str]) -> None:
        if len(args) > 1:
            raise ShellError("give one directory")
        if not args:
            self.cwd = []
            return
        found = self.resolve(args[0])
        if not found:
            raise ShellError(f"{args[0]}: no such directory")
        if len(found) > 1:
            raise ShellError(f"{args[0]}: names more than one directory")
        if not isinstance(self._node(found[0]), dict):
            raise ShellError(f"{args[0]}: not a directory")
        self.cwd = found[0]

    def cmd_cat(self, args: list[str]) -> None:
        if not args:
            raise ShellError("give a file")
        errors: list[str] = []
        for t in self._targets(args, errors):
            node = self._node(t)
            if isinstance(node, dict):
                errors.append(f"{self.show(t)}: is a directory")
                continue
            if self.as_json:
                self.emit({"path": self.show(t), "value": str(node)})
            else:
                self.out(str(node))
        self._raise(errors)

    def cmd_find(self, args: list[str]) -> None:
        errors: list[str] = []
        for t in self._targets(args, errors):
            if self.as_json:
                self._walk(t, lambda parts, _node: self.emit(self.entry(parts)))
            else:
                self._walk(t, lambda parts, _node: self.out(self.show(parts)))
        self._raise(errors)

    def _walk(self, parts: list[str], visit: Callable[[list[str], Node], None]) -> None:
        node = self._node(parts)
        if node is None:
            return
        visit(parts, node)
        if isinstance(node, dict):
            for name in sorted(node):
                self._walk([*parts, name], visit)

    def cmd_tree(self, args: list[str]) -> None:
        errors: list[str] = []
        for t in self._targets(args, errors):
            if self.as_json:
                self.emit({"path": self.show(t), "tree": _plain(self._node(t))})
            else:
                self._tree(t[-1] if t else "/", self._node(t), 0)
        self._raise(errors)

    def _tree(self, name: str, node: Node | None, depth: int) -> None:
        pad = "  " * depth
        if isinstance(node, dict):
            self.out(f"{pad}{name}:")
            for child in sorted(node):
                self._tree(child, node[child], depth + 1)
        else:
            self.out(f"{pad}{name}: {node}")

    def cmd_pwd(self, args: list[str]) -> None:
        if self.as_json:
            self.emit({"path": self.show(self.cwd)})
        else:
            self.out(self.show(self.cwd))

    def cmd_history(self, args: list[str]) -> None:
        for i, line in enumerate(self.history, 1):
            if self.as_json:
                self.emit({"index": i, "command": line})
            else:
                self.out(f"{i:5d}  {line}")

    def cmd_help(self, args: list[str]) -> None:
        if self.as_json:
            self.emit({"help": HELP})
        else:
            self.out(HELP)

    def complete(self, text: str) -> list[str]:
        """Completions of a path being typed (for readline)."""
        head, _, tail = text.rpartition("/")
        base = self.resolve(head or ("/" if text.startswith("/") else "."))
        if not base:
            return []
        node = self._node(base[0])
        if not isinstance(node, dict):
            return []
        prefix = head + "/" if text.rpartition("/")[1] else ""
        out = []
        for n in sorted(node):
            if n.startswith(tail):
                child = node[n]
                out.append(prefix + n + ("/" if isinstance(child, dict) else ""))
        return out


def _plain(node: Node | None) -> Any:
    """A subtree as JSON values: directories as objects (sorted), files as strings."""
    if isinstance(node, dict):
        return {name: _plain(node[name]) for name in sorted(node)}
    return None if node is None else str(node)


def interactive(shell: Shell, banner: str) -> int:
    """Read commands from the terminal until exit; the exit status is 0."""
    try:
        import readline

        def completer(text: str, state: int) -> str | None:
            buf = readline.get_line_buffer()
            options = shell.complete(text) if " " in buf.lstrip() else [
                c for c in ("ls", "cd", "cat", "find", "tree", "pwd", "history", "help", "exit")
                if c.startswith(text)
            ]  # fmt: skip
            return options[state] if state < len(options) else None

        readline.set_completer_delims(" \t")
        readline.set_completer(completer)
        readline.parse_and_bind("tab: complete")
    except ImportError:  # pragma: no cover - readline is there on Linux
        pass
    shell.columns = True
    shell.out(banner)
    while True:
        try:
            line = input(f"kt-metadata:{shell.show(shell.cwd)}> ")
        except EOFError:
            shell.out("")
            return 0
        except KeyboardInterrupt:
            shell.out("")
            continue
        try:
            shell.run(line)
        except SystemExit:
            return 0
