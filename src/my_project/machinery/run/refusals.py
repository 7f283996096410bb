"""An object that refuses the config it is built from, as one paragraph naming the config key.

Every object a run needs is built from a part of its config (``trainer``, ``model``,
``callbacks.model_checkpoint``, ...) before anything of the run is written. Whatever a
constructor (or a dry step of what it built) raises, :func:`built_from` turns it into one
:class:`~..errors.UserError` that names the config key and its value, the class that refused
it and its own complaint: one mechanism for every key, so a value no check of `preflight`
knows about (``+trainer.max_time=abc``, ``monitor_mode=maximum``) gets the same answer as one
it does.

Which key is to blame is not in the exception; it is found, in this order, among the leaves
of that part of the config: a key the complaint names (``save_top_k``), one the command line
set for itself (``model.net.hidden=[-5]``; of several, the one whose value the complaint
quotes), a preset of its group the command line chose (``model/net=mlp``), else the part
itself. A leaf that takes its value from elsewhere (``mode: ${monitor_mode}``) is shown with
the key that was typed.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from ..config import config_dir
from ..errors import UserError
from ..reliability.resume import override_key

_MAX_COMPLAINT = 400  # characters of the object's own message


@dataclass(frozen=True)
class Leaf:
    key: str  # its full key, e.g. `callbacks.model_checkpoint.mode`
    value: Any  # resolved
    source: str | None  # the key it is interpolated from (`${monitor_mode}`: `monitor_mode`)
    typed_as: str | None = None  # a whole group set on the command line (`model/net=cnn`)


@contextlib.contextmanager
def built_from(cfg: DictConfig, key: str, by: str | None = None) -> Iterator[None]:
    """Build (or dry-run) what ``cfg.<key>`` configures inside: any exception it raises
    becomes one UserError naming the key, the value and the complaint (of ``by``, or of the
    ``_target_`` the key is under).

    A UserError passes through unchanged (a check already said it in the user's terms); so
    does anything that is not an ``Exception`` (a stop signal, ``SystemExit``).
    """
    try:
        yield
    except UserError:
        raise
    except Exception as error:
        behind = _innermost(error)
        if isinstance(behind, UserError):
            raise behind from None
        raise UserError(refusal(cfg, key, behind, by), every_rank=True) from error


def require(cfg: DictConfig, key: str) -> DictConfig:
    """``cfg.<key>``, a config to build from: its absence (``'~data'``) is a UserError."""
    node = OmegaConf.select(cfg, key, default=None)
    if isinstance(node, DictConfig) and "_target_" in node:
        return node
    group = config_dir() / key
    options = sorted(p.stem for p in group.glob("*.yaml")) if group.is_dir() else []
    listed = f" (options: {', '.join(options)})" if options else ""
    what = "is removed" if node is None else f"has no `_target_` (it is {_show(node)})"
    raise UserError(
        f"`{key}` {what}, but this run builds an object from it. Choose one with "
        f"`{key}=<option>`{listed}, or drop the override that removed it (`~{key}`)."
    )


def refusal(cfg: DictConfig, key: str, error: BaseException, by: str | None = None) -> str:
    """The paragraph for ``error``, raised while building from ``cfg.<key>``."""
    complaint = describe(error)
    node = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
    leaves = list(_leaves(node, key)) if node is not None else []
    culprits = blamed(leaves, complaint, set_on_command_line())
    target = by or _target_of(cfg, culprits[0].key if culprits else key)
    if culprits and culprits[0].key.endswith("._target_"):
        target = None  # the class itself is what cannot be had
    refused_by = f" by {target}" if target else ""
    if culprits:
        unexpected = "unexpected keyword argument" in complaint
        shown = "; ".join(_shown_leaf(leaf, own_key=unexpected) for leaf in culprits)
        if unexpected:  # the argument is not taken: by the class the command line chose?
            parent = culprits[0].key.rsplit(".", 1)[0]
            chosen = typed_in(leaves, parent, set_on_command_line())
            shown += f" (with {', '.join(chosen)})" if chosen else ""
        first = culprits[0]
        hint = _close_keyword(error, target, first.key.rsplit(".", 1)[0])
        if unexpected:
            advice = f"Remove the key (on the command line or in {_config_file(cfg, first.key)})."
        else:
            advice = (
                "Fix the value on the command line or in "
                f"{_config_file(cfg, first.source or first.key)}, or leave it out to use the "
                "default."
            )
        verb = "were" if len(culprits) > 1 else "was"
        return f"{shown} {verb} refused{refused_by}: {_sentence(complaint)}{hint} {advice}"
    hint = _close_keyword(error, target, key)
    return (
        f"`{key}` could not be built{refused_by}: {_sentence(complaint)}{hint} Fix what it "
        f"names on the command line or in {_config_file(cfg, key)}."
    )


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def _config_file(cfg: DictConfig, key: str) -> str:
    """Where ``key`` is set: its config group's folder, else the entry config."""
    group = key.split(".")[0]
    if (config_dir() / group).is_dir():
        return f"configs/{group}/"
    return f"configs/{cfg.get('task_name', 'train')}.yaml"


def describe(error: BaseException) -> str:
    """``Type: message``, on one line, without Hydra's wrapping."""
    message = _pydantic_messages(error) or str(error)
    message = " ".join(message.split())
    if len(message) > _MAX_COMPLAINT:
        message = message[: _MAX_COMPLAINT - 3] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def blamed(leaves: list[Leaf], complaint: str, typed: Mapping[str, str]) -> list[Leaf]:
    """The leaves to name: those the complaint mentions by name (the typed ones, else the
    first); else of those the command line set for the key itself (or for the key it takes
    its value from), the one whose value the complaint quotes, else all of them; else a preset
    of the group that holds them (`model/net=mlp`), as typed."""

    def typed_for(leaf: Leaf) -> bool:
        return leaf.key in typed or (leaf.source is not None and leaf.source in typed)

    def group_typed(leaf: Leaf) -> list[str]:
        return [k for k in typed if _under(leaf.key, k) or (leaf.source and _under(leaf.source, k))]

    named = [leaf for leaf in leaves if not leaf.key.rsplit(".", 1)[-1].startswith("_")]
    mentioned = [leaf for leaf in named if _mentions(complaint, leaf.key.rsplit(".", 1)[-1])]
    if mentioned:  # the typed ones together (`strategy=fsdp` needs another `accelerator`)
        return [leaf for leaf in mentioned if typed_for(leaf)][:3] or mentioned[:1]
    exact = [leaf for leaf in leaves if typed_for(leaf)]
    quoted = [leaf for leaf in exact if _quotes(complaint, leaf.value)]
    if quoted or exact:
        return (quoted or exact)[:1] if quoted else exact
    groups = sorted({k for leaf in leaves for k in group_typed(leaf)}, key=len, reverse=True)
    return [Leaf(groups[0], None, None, typed_as=typed[groups[0]])] if groups else []


def _quotes(complaint: str, value: Any) -> bool:
    """Whether the complaint quotes ``value`` (or, for a list, one of its items)."""
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, (dict, list)) or item is None or isinstance(item, bool):
            continue
        text = re.escape(str(item))
        if re.search(rf"(?<![\w.]){text}(?![\w])", complaint):
            return True
    return False


def set_on_command_line() -> dict[str, str]:
    """The keys the command line sets (`+trainer.foo=1`: `trainer.foo`; `model/net=cnn`:
    `model.net`), each with the override as typed; none when the config was composed by
    code."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return {}
    return {override_key(o).replace("/", "."): o for o in HydraConfig.get().overrides.task}


def _under(key: str, typed: str) -> bool:
    return key == typed or key.startswith(typed + ".") or key.startswith(typed + "[")


def _mentions(complaint: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", complaint, re.IGNORECASE) is not None


def _leaves(node: Any, key: str) -> Iterator[Leaf]:
    """The values under ``node`` (lists are one value: `hidden=[128, 64]`)."""
    if not isinstance(node, DictConfig):
        yield Leaf(key, _plain(node), None)
        return
    raw = OmegaConf.to_container(node, resolve=False)
    assert isinstance(raw, dict)
    for child in node:
        name = str(child)
        child_key = f"{key}.{name}"
        if OmegaConf.is_interpolation(node, name):
            yield Leaf(child_key, _resolved(node, name), _interpolated_key(raw[name]))
        elif isinstance(node[name], DictConfig):
            yield from _leaves(node[name], child_key)
        else:
            yield Leaf(child_key, _plain(node[name]), None)


def _resolved(node: DictConfig, name: str) -> Any:
    try:
        return _plain(node[name])
    except Exception:  # an interpolation that does not resolve is its own check's business
        return None


def _plain(value: Any) -> Any:
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _interpolated_key(raw: Any) -> str | None:
    """`${monitor_mode}` -> `monitor_mode`; None for anything but one plain reference."""
    match = re.fullmatch(r"\$\{([\w.]+)\}", str(raw))
    return match[1] if match else None


def _show(value: Any) -> str:
    """A value as it would be typed on the command line."""
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=False)
    if isinstance(value, (list, dict)):
        return re.sub(r"'", "", str(value)).replace(": ", ":")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def typed_in(leaves: list[Leaf], parent: str, typed: Mapping[str, str]) -> list[str]:
    """The class of ``parent`` as the command line chose it (its `_target_`, as typed)."""
    key = f"{parent}._target_"
    return [f"`{typed[key]}`" for leaf in leaves if leaf.key == key and key in typed]


def _shown_leaf(leaf: Leaf, own_key: bool = False) -> str:
    if leaf.typed_as:
        return f"`{leaf.typed_as}`"
    shown = f"`{leaf.key}={_show(leaf.value)}`"
    if leaf.source and not own_key:
        shown = f"`{leaf.source}={_show(leaf.value)}` (as {leaf.key})"
    return shown


def _target_of(cfg: DictConfig, key: str) -> str | None:
    """The ``_target_`` of the innermost config above (or at) ``key`` that has one."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        node = OmegaConf.select(cfg, ".".join(parts[:end]), default=None)
        if isinstance(node, DictConfig) and isinstance(node.get("_target_"), str):
            return str(node._target_)
    return None


def _close_keyword(error: BaseException, target: str | None, where: str) -> str:
    """ " Did you mean `trainer.max_epochs`?" for an unexpected keyword argument."""
    match = re.search(r"unexpected keyword argument '(\w+)'", str(error))
    if match is None or target is None:
        return ""
    try:
        from hydra.utils import get_object

        obj = get_object(target)
        names = list(inspect.signature(obj.__init__ if inspect.isclass(obj) else obj).parameters)
    except Exception:
        return ""
    close = difflib.get_close_matches(match[1], [n for n in names if n != "self"], n=1)
    return f" Did you mean `{where}.{close[0]}`?" if close else ""


def _innermost(error: BaseException) -> BaseException:
    """What Hydra's ``instantiate`` (and OmegaConf's resolvers) wrapped: the object's own error."""
    from hydra.errors import InstantiationException

    current = error
    seen: set[int] = set()
    while id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, UserError):
            return current
        cause = current.__cause__
        if cause is None or not isinstance(current, InstantiationException):
            return current
        current = cause
    return current


def _pydantic_messages(error: BaseException) -> str | None:
    """A pydantic ValidationError (wandb's settings) as "field: message" pairs."""
    errors = getattr(error, "errors", None)
    if type(error).__name__ != "ValidationError" or not callable(errors):
        return None
    try:
        found = errors()
    except Exception:
        return None
    parts = []
    for item in found if isinstance(found, list) else []:
        if isinstance(item, Mapping):
            where = ".".join(str(p) for p in item.get("loc", ()))
            parts.append(f"{where}: {item.get('msg', '')}" if where else str(item.get("msg", "")))
    return "; ".join(parts) or None
