"""Settings declared once, as dataclass fields whose metadata says what a flag needs: the flags of a
command are made from them (:func:`add_flags`), read back (:func:`given`) and checked (:func:`check`), so no
command lists a setting twice. The study's tables (:class:`lexkit.study.plan.TableSettings`) and
``lexkit train``'s run settings are declared so.

A field's metadata: ``help``; ``metavar``; ``choices``; ``maximum`` (an integer's; default
:data:`lexkit.core.checks.MAX_COUNT`) and ``minimum`` (inclusive; without it an integer must be positive), which
:func:`check` enforces; ``type`` for a field whose default is None (the value's type when given); a list
field is a repeatable flag, a boolean one an on/off flag: ``--NAME``/``--no-NAME`` where its default is None
(``negatable``: argparse's BooleanOptionalAction), ``--no-NAME`` where its default is True, ``--NAME`` where
it is False; ``checked=False`` leaves a field to a later check of its own (a config's); ``flag=False`` gives
it no flag here (the command declares it once for several settings, as ``lexkit inspect``'s ``--data``)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from . import checks


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


def add_flags(parser, settings: type, *, flag: Callable[[str], str] = flag_name,
              dest: Callable[[str], str] = lambda name: name) -> None:
    """A flag for each field of the dataclass ``settings``, named by ``flag(field name)`` and stored
    under ``dest(field name)`` (module docstring: the metadata it reads)."""
    for field in dataclasses.fields(settings):
        meta, kind, name, where = field.metadata, field_type(field), flag(field.name), dest(field.name)
        if not meta.get("flag", True):
            continue
        if kind is bool and field.default is None:
            parser.add_argument(name, dest=where, action=argparse.BooleanOptionalAction, default=None,
                                help=meta.get("help"))
        elif kind is bool and field.default:
            parser.add_argument("--no-" + name[2:] if not name.startswith("--no-") else name, dest=where,
                                action="store_false", help=meta.get("help"))
        elif kind is bool:
            parser.add_argument(name, dest=where, action="store_true", help=meta.get("help"))
        elif kind is list:
            parser.add_argument(name, dest=where, action="append", metavar=meta.get("metavar"), help=meta.get("help"))
        else:
            parser.add_argument(name, dest=where, type=kind, default=field.default, choices=meta.get("choices"),
                                metavar=meta.get("metavar"), help=meta.get("help"))


def given(args, settings: type, *, dest: Callable[[str], str] = lambda name: name) -> dict[str, Any]:
    """Each field's value as the command line gave it (a repeatable flag not given: its default)."""
    out = {}
    for field in dataclasses.fields(settings):
        value = getattr(args, dest(field.name))
        if value is None and field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
        out[field.name] = value
    return out


def check(values: Any, name: Callable[[str], str]) -> None:
    """A ValueError naming the setting (``name(field name)``: a keyword or a flag) of the first value out
    of range in the dataclass instance ``values``: an integer not positive or above its ``maximum`` (or
    below its ``minimum``), a value not among its ``choices``. A None where the default is None is the
    caller's own choice, not checked."""
    for field in dataclasses.fields(values):
        value = getattr(values, field.name)
        if (value is None and field.default is None) or not field.metadata.get("checked", True):
            continue
        if "choices" in field.metadata and value not in field.metadata["choices"]:
            raise ValueError(f"{name(field.name)} must be one of {', '.join(field.metadata['choices'])}, "
                             f"got {value!r}")
        if field_type(field) is int:
            minimum = field.metadata.get("minimum")  # inclusive where given; else a positive number
            checks.number(name(field.name), value, maximum=field.metadata.get("maximum", checks.MAX_COUNT),
                          minimum=minimum, strict=minimum is None)
