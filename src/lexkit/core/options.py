"""Settings declared once, as dataclass fields whose metadata says what a flag needs: the flags of a
command are made from them (:func:`add_flags`), read back (:func:`given`) and checked (:func:`check`), so no
command lists a setting twice. The study's tables (:class:`lexkit.study.plan.TableSettings`) and
``lexkit train``'s settings (the fields of :class:`lexkit.model.gpt.ModelConfig` and
:class:`lexkit.training.settings.TrainConfig`) are declared so; :func:`setting` writes such a field.

A field's metadata: ``help``; ``metavar``; ``choices``; ``maximum`` (an integer's; default
:data:`lexkit.core.checks.MAX_COUNT`) and ``minimum`` (inclusive; without it an integer must be positive), which
:func:`check` enforces (a float's too where it declares either: finite, in range, positive without a
``minimum``); ``type`` for a field whose default is None (the value's type when given); a list
field is a repeatable flag, and so is a string field with ``join`` (its values joined by that separator:
``--mix a --mix b`` is ``"a,b"``); a boolean one an on/off flag: ``--NAME``/``--no-NAME`` where its default
is None (``negatable``: argparse's BooleanOptionalAction), ``--no-NAME`` where its default is True, ``--NAME``
where it is False; ``checked=False`` leaves a field to a later check of its own (a config's); ``flag=False``
gives it no flag here (the command declares it once for several settings, as ``lexkit inspect``'s ``--data``,
or it is not a flag of the command at all), and a string ``flag`` names its flag (``--layers`` for
``n_layers``; its metavar then ``LAYERS``).

Where a flag's text is not the value: ``parse``, the function from the text to the value (``--lengths
256,1024`` -> ``[256, 1024]``: one text flag, parsed by :func:`given`); a tuple field is repeatable as a list
one is; a boolean field whose default is not a boolean (``"auto"``) is ``--NAME``/``--no-NAME``, its default
where neither is given. ``help`` may be a function of nothing, read when the flag is made (a registry's
names, with what ``--import`` added); ``group``: the title of the argument group its flag is listed under
(where the flags go to a parser); ``check``: a function ``(name, value)`` raising ValueError for a bound no
other metadata says (lengths at most a maximum: :func:`bounded_lengths`), called by :func:`check` on a
value not None.

``unset=True`` (:func:`add_flags`, :func:`given`) makes flags for settings whose defaults are someone else's
(``lexkit train``'s: the preset's, the parent run's under ``--init``, the run's own under ``--resume``):
every flag defaults to None, not given, and a boolean one is ``--NAME``/``--no-NAME``."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from . import checks
from .specs import parse_lengths


def setting(default: Any = None, help: str | None = None, **metadata: Any) -> Any:
    """A field declaring a setting: its ``default``, its ``help`` and the rest of its metadata (module
    docstring), e.g. ``steps: int = setting(1000, "training steps")``."""
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


def bounded_lengths(maximum: int) -> Callable[[str, Any], list[int]]:
    """A ``check`` for a field of sequence lengths: :func:`lexkit.core.specs.parse_lengths`' rule, each at
    most ``maximum`` (:func:`lexkit.core.checks.lengths`: what fits memory)."""
    def check_lengths(name: str, values: Any) -> list[int]:
        return checks.lengths(name, parse_lengths(values), maximum)

    return check_lengths


def field_type(field: dataclasses.Field) -> type:
    """The type of a setting's values: its metadata's ``type``, else its default's (list for a field
    with a default factory)."""
    if "type" in field.metadata:
        return field.metadata["type"]
    if field.default_factory is not dataclasses.MISSING:
        return type(field.default_factory())
    return type(field.default)


def flag_name(name: str) -> str:
    """``--token-shift`` for the field ``token_shift``."""
    return "--" + name.replace("_", "-")


def flag_of(field: dataclasses.Field, flag: Callable[[str], str] = flag_name) -> str:
    """A field's flag: its own ``flag`` where it names one, else ``flag(field name)``."""
    own = field.metadata.get("flag")
    return own if isinstance(own, str) else flag(field.name)


def flagged(settings: type) -> list[dataclasses.Field]:
    """The fields of the dataclass ``settings`` that have a flag here (all but ``flag=False``)."""
    return [field for field in dataclasses.fields(settings) if field.metadata.get("flag", True) is not False]


def add_flags(parser, settings: type, *, flag: Callable[[str], str] = flag_name,
              dest: Callable[[str], str] = lambda name: name, unset: bool = False,
              describe: Callable[[dataclasses.Field, str | None], str | None] | None = None) -> None:
    """A flag for each field of the dataclass ``settings``, named by ``flag(field name)`` (or the field's
    own ``flag``) and stored under ``dest(field name)`` (module docstring: the metadata it reads, and
    ``unset``). ``describe(field, help)``: the help shown, where the command adds to it (a default
    that is not the field's)."""
    groups: dict[str, Any] = {}
    into = parser
    for field in flagged(settings):
        meta, kind, where = field.metadata, field_type(field), dest(field.name)
        parser = into
        if meta.get("group") and not isinstance(into, argparse._ArgumentGroup):  # groups do not nest
            if meta["group"] not in groups:
                groups[meta["group"]] = into.add_argument_group(meta["group"])
            parser = groups[meta["group"]]
        name, own = flag_of(field, flag), isinstance(meta.get("flag"), str)
        text = meta["help"]() if callable(meta.get("help")) else meta.get("help")  # a function: read now
        text = text if describe is None else describe(field, text)
        metavar = meta.get("metavar") or (name[2:].upper().replace("-", "_") if own else None)
        if "parse" in meta:
            parser.add_argument(name, dest=where, default=None, metavar=metavar, help=text)
        elif kind is bool and (unset or not isinstance(field.default, bool)):
            parser.add_argument(name, dest=where, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif kind is bool and field.default:
            parser.add_argument("--no-" + name[2:] if not name.startswith("--no-") else name, dest=where,
                                action="store_false", help=text)
        elif kind is bool:
            parser.add_argument(name, dest=where, action="store_true", help=text)
        elif kind in (list, tuple) or "join" in meta:
            parser.add_argument(name, dest=where, action="append", default=None, metavar=metavar, help=text)
        else:
            parser.add_argument(name, dest=where, type=kind, default=None if unset else field.default,
                                choices=meta.get("choices"), metavar=metavar, help=text)


def given(args, settings: type, *, dest: Callable[[str], str] = lambda name: name,
          unset: bool = False) -> dict[str, Any]:
    """Each field's value as the command line gave it (a flag not given: its default; a ``join`` one's
    values joined, a ``parse`` one's text parsed, a tuple's values a tuple). ``unset``: the fields with a flag
    only, each None where not given."""
    out = {}
    for field in flagged(settings) if unset else dataclasses.fields(settings):
        value = getattr(args, dest(field.name))
        if value is not None and "join" in field.metadata:
            value = field.metadata["join"].join(value)
        elif value is not None and "parse" in field.metadata:
            value = field.metadata["parse"](value)
        elif value is None and not unset:
            if field.default_factory is not dataclasses.MISSING:
                value = field.default_factory()
            elif field.default is not dataclasses.MISSING:
                value = field.default
        out[field.name] = tuple(value) if isinstance(value, list) and field_type(field) is tuple else value
    return out


def check(values: Any, name: Callable[[str], str] | None = None) -> None:
    """A ValueError naming the setting (``name(field name)``: a keyword or a flag; default: the field's own
    flag, :func:`flag_of`) of the first value out of range in the dataclass instance ``values``: an integer
    not positive or above its ``maximum`` (or below its ``minimum``), a float outside the bounds it declares,
    a value not among its ``choices``, or one its ``check`` refuses. A None where the default is None is the
    caller's own choice, not checked."""
    name = name or {field.name: flag_of(field) for field in dataclasses.fields(values)}.__getitem__
    for field in dataclasses.fields(values):
        value, meta = getattr(values, field.name), field.metadata
        if (value is None and field.default is None) or not meta.get("checked", True):
            continue
        if "choices" in meta and value not in meta["choices"]:
            raise ValueError(f"{name(field.name)} must be one of {', '.join(meta['choices'])}, got {value!r}")
        kind = field_type(field)
        if kind is int or (kind is float and ("maximum" in meta or "minimum" in meta)):
            minimum = meta.get("minimum")  # inclusive where given; else a positive number
            checks.number(name(field.name), value, maximum=meta.get("maximum", checks.MAX_COUNT),
                          minimum=minimum, strict=minimum is None, integer=kind is int)
        if "check" in meta and value is not None:
            meta["check"](name(field.name), value)
