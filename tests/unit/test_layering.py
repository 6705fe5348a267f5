"""The dependency rule, checked on every module's imports: storage and protocol use
nothing of ours, the pure cluster model only those two, the admin layer (what the
tools and the TUI share) only those and the client; the client, the admin layer, the
tools, the TUI and the Spark pipeline never reach into the broker (the `kt broker`
command, which starts one, excepted); the TUI never imports the tools (what both need
lives in kt.admin), and no TUI screen or widget imports the app (screens talk to it
with Textual messages). Inside the broker, only the server imports the composition
root (`kt/broker/broker.py`), the import graph has no cycle, and only the root and its
settings builders see the whole BrokerConfig."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kt

ROOT = Path(kt.__file__).parent

#: package -> the kt packages its modules may import (besides themselves)
ALLOWED: dict[str, set[str]] = {
    "storage": set(),
    "protocol": set(),
    "cluster": {"storage", "protocol"},
    "client": {"storage", "protocol"},
    "admin": {"storage", "protocol", "cluster", "client"},
}
#: packages that must not import the broker, and the modules excused (why)
NO_BROKER = ("client", "admin", "tools", "tui", "spark", "cluster", "storage", "protocol")
EXCUSED = {"kt/tools/broker_cmd.py"}  # `kt broker start` runs the broker


def _kt_modules(path: Path, name: str | None = None) -> set[str]:
    """Every `kt.*` module the file imports, anywhere in it (function bodies and
    `if TYPE_CHECKING:` blocks included), as a dotted name; `from kt.x import y`
    counts as both `kt.x` and `kt.x.y` (y may be a module). Relative imports are
    resolved against the file's module `name` (default: from its path under kt)."""
    if name is None and path.is_relative_to(ROOT):
        name = _module_name(path)
    package = None
    if name is not None:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("kt."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if package is None:
                    continue
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if base == "kt" or base.startswith("kt."):
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _kt_imports(path: Path) -> set[str]:
    """The first component under kt of every `kt.*` module the file imports."""
    return {name.split(".")[1] for name in _kt_modules(path) if name.count(".") >= 1}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_core_packages_import_only_what_they_may(package: str) -> None:
    bad = {
        str(path.relative_to(ROOT.parent)): sorted(found - ALLOWED[package] - {package})
        for path in _modules(package)
        if (found := _kt_imports(path)) - ALLOWED[package] - {package}
    }
    assert not bad, f"kt.{package} may import only {sorted(ALLOWED[package])}: {bad}"


@pytest.mark.parametrize("package", NO_BROKER)
def test_nothing_outside_the_broker_imports_it(package: str) -> None:
    bad = [
        str(path.relative_to(ROOT.parent))
        for path in _modules(package)
        if "broker" in _kt_imports(path) and str(path.relative_to(ROOT.parent)) not in EXCUSED
    ]
    assert not bad, f"these kt.{package} modules import kt.broker: {bad}"


def test_the_checks_see_imports() -> None:
    # the walker itself: a broker import in a function body counts
    assert _kt_imports(ROOT / "tools" / "broker_cmd.py") >= {"broker"}


def test_the_tui_does_not_import_the_tools() -> None:
    # what both need (offset resets, reassignment plans, progress and status) is kt.admin
    bad = [
        str(path.relative_to(ROOT.parent))
        for path in _modules("tui")
        if "tools" in _kt_imports(path)
    ]
    assert not bad, f"these kt.tui modules import kt.tools (use kt.admin): {bad}"


@pytest.mark.parametrize("folder", ["screens", "widgets"])
def test_no_tui_screen_or_widget_imports_the_app(folder: str) -> None:
    # screens read the app as kt.tui.host.DashboardHost and post it kt.tui.host's
    # messages; widgets get what they show from the screen that mounts them
    bad = [
        str(path.relative_to(ROOT.parent))
        for path in sorted((ROOT / "tui" / folder).rglob("*.py"))
        # `from kt.tui import app` and `from .. import app` included
        if "kt.tui.app" in _kt_modules(path)
    ]
    assert not bad, f"these kt/tui/{folder} modules import kt.tui.app: {bad}"


def _app_calls(path: Path) -> list[str]:
    """`self.app.NAME(...)` calls in the file other than `post_message`: a screen or
    widget that drives the app directly instead of asking it with a message."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "app"
            and isinstance(node.func.value.value, ast.Name)
            and node.func.value.value.id == "self"
            and node.func.attr != "post_message"
        ):
            out.append(f"{path.name}:{node.lineno} self.app.{node.func.attr}()")
    return out


def test_screens_and_widgets_reach_the_app_only_through_messages(tmp_path: Path) -> None:
    # navigation and actions are kt.tui.host's messages, handled in the app's on_*;
    # reading its state goes through DashboardHost
    bad = [
        call
        for folder in ("screens", "widgets")
        for path in sorted((ROOT / "tui" / folder).rglob("*.py"))
        for call in _app_calls(path)
    ]
    assert not bad, f"screens/widgets calling the app instead of posting it a message: {bad}"
    probe = tmp_path / "probe.py"
    probe.write_text("class S:\n    def f(self):\n        self.app.push_screen(1)\n"
                     "        self.app.post_message(2)\n")  # fmt: skip
    assert _app_calls(probe) == ["probe.py:3 self.app.push_screen()"]


def test_the_import_walker_sees_type_checking_and_local_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from kt.tui.app import KtApp\n"
        "def f():\n"
        "    from kt.tools import reassign_cmd\n"
        "    import kt.admin.offset_reset\n"
    )
    assert {"kt.tui.app", "kt.tools.reassign_cmd", "kt.admin.offset_reset"} <= _kt_modules(module)
    assert _kt_imports(module) == {"tui", "tools", "admin"}


def test_the_import_walker_resolves_relative_imports(tmp_path: Path) -> None:
    screen = tmp_path / "s.py"
    screen.write_text("from .. import app\nfrom ..app import KtApp\nfrom . import base\n")
    found = _kt_modules(screen, "kt.tui.screens.s")
    assert {"kt.tui.app", "kt.tui.screens.base"} <= found
    widget = tmp_path / "__init__.py"
    widget.write_text("from ...tools import console\n")
    assert "kt.tools.console" in _kt_modules(widget, "kt.tui.widgets")
    assert _kt_modules(screen) == set()  # outside kt and unnamed: nothing to resolve against


# --- inside the broker: one composition root, no import cycle ----------------------

#: The composition root: `server.py` runs the broker `broker.py` builds. Nothing else
#: under kt/broker may import either (not even for type checking): services get what
#: they use in their constructors, never the broker.
COMPOSITION_ROOT = {"kt.broker.broker", "kt.broker.server"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _broker_imports(path: Path, known: set[str], name: str | None = None) -> set[str]:
    """The kt.broker modules `path` imports anywhere in it (module level, functions,
    `if TYPE_CHECKING:` blocks), relative imports resolved; `from pkg import name`
    counts as importing the module `pkg.name` when that is one, else `pkg`. `name`
    is the file's module name (default: from its path under kt)."""
    name = name or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()

    def add(module: str) -> None:
        while module and module not in known:
            module = module.rpartition(".")[0]
        if module and module != name:
            found.add(module)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kt.broker"):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if not base.startswith("kt.broker"):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base)
    return found


def _broker_graph() -> dict[str, set[str]]:
    paths = _modules("broker")
    known = {_module_name(p) for p in paths}
    return {_module_name(p): _broker_imports(p, known) for p in paths}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_only_the_server_imports_the_composition_root() -> None:
    bad = {
        module: sorted(imported & COMPOSITION_ROOT)
        for module, imported in _broker_graph().items()
        if imported & COMPOSITION_ROOT and module != "kt.broker.server"
    }
    assert not bad, f"these modules import the broker's composition root: {bad}"
    assert "kt.broker.server" not in _broker_graph()["kt.broker.broker"]


def test_the_broker_import_graph_has_no_cycle() -> None:
    cycles = _cycles(_broker_graph())
    assert not cycles, f"import cycles under kt/broker: {cycles}"


def test_the_broker_checks_see_every_import(tmp_path: Path) -> None:
    # type-checking-only and relative imports count; a cycle of two is found
    known = {"kt.broker.a", "kt.broker.b", "kt.broker.broker"}
    source = tmp_path / "a.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from kt.broker.broker import Broker\n"
        "from . import b\n"
    )
    graph = {"kt.broker.a": {"kt.broker.b"}, "kt.broker.b": {"kt.broker.a"}}
    assert _cycles(graph) == [["kt.broker.a", "kt.broker.b"]]
    imported = _broker_imports(source, known, "kt.broker.a")
    assert imported == {"kt.broker.broker", "kt.broker.b"}


# --- the broker's configuration: read by the root, handed on as settings ------------

#: The modules that may see the whole `BrokerConfig` (or load one): the config itself,
#: the settings builders (kt/broker/config_settings.py) and the composition root.
#: Every service gets a frozen settings object, a narrow view or a callable instead.
CONFIG_READERS = {
    "kt.broker.config",
    "kt.broker.config_settings",
    "kt.broker.broker",
    "kt.broker.server",
}
_WHOLE_CONFIG = {"BrokerConfig", "load_config"}


def _config_uses(path: Path) -> list[str]:
    """Where the file names the whole broker config: an import of `BrokerConfig` or
    `load_config` (anywhere, `if TYPE_CHECKING:` included), a use of either name
    (an annotation, a call, `kt.broker.config.BrokerConfig`), or a quoted annotation
    naming it. Prose (docstrings, comments) does not count."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[str] = []
    annotations: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names
                      if a.name in _WHOLE_CONFIG]  # fmt: skip
        elif isinstance(node, ast.Name) and node.id in _WHOLE_CONFIG:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in _WHOLE_CONFIG:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
            annotations.append(node.returns)
    for annotation in annotations:
        for sub in ast.walk(annotation):
            text = sub.value if isinstance(sub, ast.Constant) else None
            if isinstance(text, str) and any(name in text for name in _WHOLE_CONFIG):
                found.append(f"line {sub.lineno}: {sub.value!r}")
    return found


def test_only_the_root_and_the_settings_builders_see_the_broker_config() -> None:
    # Services take a frozen settings object (kt/broker/settings.py, or beside the
    # service), a read-only view (kt.broker.services.BrokerConfigView) or a callable:
    # never the mutable whole, which the root replaces when dynamic configs change.
    bad = {
        name: uses
        for path in _modules("broker")
        if (name := _module_name(path)) not in CONFIG_READERS and (uses := _config_uses(path))
    }
    assert not bad, f"these modules take or import the whole BrokerConfig: {bad}"
    # the builders are the root's: no service builds its own settings
    builders = {m for m, imported in _broker_graph().items()
                if "kt.broker.config_settings" in imported}  # fmt: skip
    assert builders <= COMPOSITION_ROOT, f"only the root uses the settings builders: {builders}"


def test_the_config_check_sees_every_use(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Built from the BrokerConfig (prose does not count)."""\n'
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..config import BrokerConfig as Cfg\n"
        "import kt.broker.config\n"
        "def f(a: 'BrokerConfig') -> None: ...\n"
        "def g(b: 'dict[str, BrokerConfig]') -> kt.broker.config.BrokerConfig: ...\n"
        "h = kt.broker.config.load_config\n"
    )
    uses = _config_uses(module)
    assert {u.split(":")[0] for u in uses} == {"line 4", "line 6", "line 7", "line 8"}
    clean = tmp_path / "n.py"
    clean.write_text('"""Settings built from the BrokerConfig."""\n# BrokerConfig\nx = 1\n')
    assert _config_uses(clean) == []
