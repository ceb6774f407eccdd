"""Typed configuration machinery: declared options, validation with clear errors, TOML and overrides.

This module imports nothing of raysfl. Each component declares its own frozen dataclass of options
with :func:`option` (the data section in ``raysfl/data/config.py``, the system section in
``raysfl/system/config.py``, and so on); :mod:`raysfl.scenario` composes them into a ``Scenario``.

:func:`build` turns a plain mapping (parsed TOML plus ``key=value`` overrides) into such a dataclass and
collects *every* problem (unknown keys with the closest valid name, wrong types, values out of range or
outside the allowed set) into one :class:`ConfigError`, each named by its dotted path.

Renamed options keep working: :func:`aliases` lets a class accept an old key as another name of a field
(giving both is an error naming both), and ``option(synonyms=...)`` maps an old spelling of a value to
the value it stands for (the built dataclass holds the current spelling).

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Link:
    ...     kind: str = option("fixed", choices=("fixed", "wireless"), doc="link model")
    ...     rate_bps: float = option(1e6, gt=0, doc="fixed rate")
    >>> build(Link, {"kind": "wireless"}).kind
    'wireless'
    >>> build(Link, {"rate_bsp": 3}, path="system.link")
    Traceback (most recent call last):
    ...
    raysfl.config.ConfigError: system.link.rate_bsp: unknown key (did you mean 'rate_bps'?)
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import math
import tomllib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_META = "raysfl"
_ALIASES = "__raysfl_aliases__"  # the class attribute where :func:`aliases` keeps old key -> field name
MAX_FILE_BYTES = 1 << 20  # a scenario is a small text file; the largest shipped one is about 2 kB
MAX_STRING_CHARS = 4096  # a path (PATH_MAX) or a line of description; longer values are mistakes


class ConfigError(ValueError):
    """One or more invalid configuration values; ``problems`` lists them as ``"dotted.path: why"``."""

    def __init__(self, problems: Sequence[str], source: str = "", kind: str = "scenario") -> None:
        self.problems = list(problems)
        self.source = source
        self.kind = kind  # what ``source`` is: a scenario or a sweep file
        super().__init__("\n".join(self.problems))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (a sweep trial's error crossing Ray) with its own arguments, not the joined message."""
        return (type(self), (self.problems, self.source, self.kind))

    def report(self) -> str:
        """A human paragraph: where, then one problem per line."""
        head = f"invalid {self.kind} {self.source}" if self.source else "invalid configuration"
        return head + ":\n" + "\n".join(f"  - {p}" for p in self.problems)


@dataclasses.dataclass(frozen=True)
class Above:
    """An ``applies`` condition on a number: the option is read only while its sibling exceeds ``limit``.

    ``option(..., applies={"dropout": Above(0)})`` reads "used only when dropout > 0".

    Example:
        >>> 0.3 in Above(0), 0.0 in Above(0), Above(0)
        (True, False, > 0)
    """

    limit: float

    def __contains__(self, value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > self.limit

    def __repr__(self) -> str:
        return f"> {self.limit:g}"


@dataclasses.dataclass(frozen=True)
class Below:
    """An ``applies`` condition on a number: the option is read only while its sibling is under ``limit``.

    Example:
        >>> 8 in Below(32), 32 in Below(32), Below(32)
        (True, False, < 32)
    """

    limit: float

    def __contains__(self, value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value < self.limit

    def __repr__(self) -> str:
        return f"< {self.limit:g}"


Condition = tuple[Any, ...] | Above | Below
"""What an ``applies`` entry allows its sibling: a tuple of values, or a bound on a number."""


@dataclasses.dataclass(frozen=True)
class OptionMeta:
    """Constraints and documentation attached to one dataclass field by :func:`option`."""

    doc: str = ""
    choices: tuple[Any, ...] | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    check: Callable[[Any], str | None] | None = None
    synonyms: Mapping[Any, Any] | None = dataclasses.field(default=None, hash=False)
    applies: Mapping[str, Condition] | None = dataclasses.field(default=None, hash=False)
    diagnostic: bool = False


def option(
    default: Any = dataclasses.MISSING,
    *,
    doc: str = "",
    choices: Sequence[Any] | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    check: Callable[[Any], str | None] | None = None,
    factory: Any = dataclasses.MISSING,
    synonyms: Mapping[Any, Any] | None = None,
    applies: Mapping[str, Sequence[Any] | Above | Below] | None = None,
    diagnostic: bool = False,
) -> Any:
    """Declare a configuration field with its default, allowed values and a one-line doc.

    ``choices`` restricts the value to a set; ``ge``/``gt``/``le``/``lt`` bound numbers (for a tuple or
    list field, every element). ``check`` returns why a (type-checked) value is not allowed, or ``None``.
    Use ``factory`` for nested dataclasses. ``synonyms`` maps other spellings of a value (an old name) to
    the value they stand for; :func:`build` stores the value, so ``{"none": "constant"}`` makes
    ``"none"`` build as ``"constant"`` (each synonym's target must itself be allowed).
    ``applies`` maps sibling fields to the values under which this option is read at all
    (``{"kind": ("wireless",)}``: only a wireless link reads it; ``{"dropout": Above(0)}``: only a positive
    dropout rate does); :func:`unused_options` lists the options a set of values leaves unread, so a report
    does not tell two runs apart by them. Several siblings: all must hold. ``diagnostic=True`` declares an
    option that only adds measurements (a meter logged beside the metrics): the run's numbers are the same
    whatever its value, so a report groups runs that differ only there (:func:`diagnostic_options`).

    Every float must be finite unless it equals the field's default (a default of ``-inf`` may mean
    "unset"); every string is at most :data:`MAX_STRING_CHARS` long without control characters.
    """
    allowed = tuple(choices) if choices is not None else None
    if synonyms and allowed is not None and any(v not in allowed for v in synonyms.values()):
        raise TypeError(f"option synonyms {dict(synonyms)!r} must map to values of choices {allowed!r}")
    frozen = types.MappingProxyType(dict(synonyms)) if synonyms else None
    when = (
        types.MappingProxyType(
            {k: v if isinstance(v, (Above, Below)) else tuple(v) for k, v in applies.items()}
        )
        if applies
        else None
    )
    meta = {_META: OptionMeta(doc, allowed, ge, gt, le, lt, check, frozen, when, diagnostic)}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def option_meta(field: dataclasses.Field) -> OptionMeta:
    """The :class:`OptionMeta` of a field (empty when it was declared without :func:`option`)."""
    return field.metadata.get(_META, OptionMeta())


def unused_options(cls: type, values: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the options of ``cls`` (and its nested sections) that ``values`` leaves unread.

    An option declared with ``applies={"kind": ("wireless",)}`` is unused when the section's ``kind``
    (from ``values``, else its default) is another. Nested dataclass sections are walked with their
    sub-mapping of ``values``; anything ``values`` holds that ``cls`` does not declare is ignored.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Link:
        ...     kind: str = option("fixed", choices=("fixed", "wireless"))
        ...     radius_m: float = option(1000.0, applies={"kind": ("wireless",)})
        >>> unused_options(Link, {"kind": "fixed", "radius_m": 500.0}, prefix="system.link.")
        ['system.link.radius_m']
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}

    def value(name: str) -> Any:
        if name in values:
            return values[name]
        f = fields[name]
        return f.default if f.default is not dataclasses.MISSING else None

    unused: list[str] = []
    for name, f in fields.items():
        sub = values.get(name)
        if dataclasses.is_dataclass(hints.get(name)) and isinstance(sub, Mapping):
            unused += unused_options(hints[name], sub, f"{prefix}{name}.")
            continue
        when = option_meta(f).applies or {}
        if any(value(other) not in allowed for other, allowed in when.items()):
            unused.append(prefix + name)
    return unused


def diagnostic_options(cls: type, prefix: str = "") -> list[str]:
    """Dotted names of the options of ``cls`` (and its nested sections) declared ``diagnostic=True``.

    An option that reads only under a diagnostic one (``applies={"meter_every": Above(0)}``) changes no
    number either, so it is listed too.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Params:
        ...     lr: float = option(0.1, gt=0)
        ...     meter_every: int = option(0, ge=0, diagnostic=True)
        ...     meter_rows: int = option(64, ge=1, applies={"meter_every": Above(0)})
        >>> diagnostic_options(Params, prefix="algorithm.params.")
        ['algorithm.params.meter_every', 'algorithm.params.meter_rows']
    """
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    flagged = {f.name for f in fields if option_meta(f).diagnostic}
    found: list[str] = []
    for f in fields:
        if dataclasses.is_dataclass(hints.get(f.name)):
            found += diagnostic_options(hints[f.name], f"{prefix}{f.name}.")
            continue
        meta = option_meta(f)
        if meta.diagnostic or (meta.applies and set(meta.applies) <= flagged):
            found.append(prefix + f.name)
    return found


def aliases(**old_to_new: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: accept each keyword's name as an old key for the field it names.

    A renamed option keeps working in existing scenario files: the value given under the old key is
    validated and stored as the field (errors name the key as written), and giving both keys is an error
    that names both. Apply it above ``@dataclass``; subclasses inherit the aliases.

    Example:
        >>> @aliases(rate="rate_bps")
        ... @dataclasses.dataclass(frozen=True)
        ... class Link:
        ...     rate_bps: float = option(1e6, gt=0, doc="fixed rate")
        >>> build(Link, {"rate": 5.0}) == build(Link, {"rate_bps": 5.0})
        True
        >>> build(Link, {"rate": 5.0, "rate_bps": 5.0}, path="link")
        Traceback (most recent call last):
        ...
        raysfl.config.ConfigError: link.rate and link.rate_bps name the same option ('rate' is the old \
name of 'rate_bps'); give only 'rate_bps'
    """

    def apply(cls: type[T]) -> type[T]:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for old, new in old_to_new.items():
            if new not in names:
                raise TypeError(f"alias {old!r} of {cls.__name__}: {new!r} is not one of its fields")
            if old in names:
                raise TypeError(f"alias {old!r} of {cls.__name__} is itself a field")
        setattr(cls, _ALIASES, {**key_aliases(cls), **old_to_new})
        return cls

    return apply


def key_aliases(cls: type) -> dict[str, str]:
    """The old keys :func:`aliases` declared for ``cls`` (or a base class), each mapped to its field."""
    return dict(getattr(cls, _ALIASES, {}))


def describe_options(cls: type) -> list[str]:
    """One line per option of the dataclass ``cls``: key, type, default, allowed values, old keys, doc.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Link:
        ...     rate_bps: float = option(1e6, gt=0, doc="fixed rate")
        >>> describe_options(Link)
        ['rate_bps: float = 1000000.0 (> 0) — fixed rate']
    """
    old_keys: dict[str, list[str]] = {}
    for old, new in key_aliases(cls).items():
        old_keys.setdefault(new, []).append(old)
    hints = typing.get_type_hints(cls)
    lines = []
    for f in dataclasses.fields(cls):
        meta = option_meta(f)
        if f.default is not dataclasses.MISSING:
            default = f" = {f.default!r}"
        elif f.default_factory is not dataclasses.MISSING:
            default = " (a table)"
        else:
            default = " (required)"
        allowed = []
        if meta.choices is not None:
            allowed.append("one of " + ", ".join(repr(c) for c in meta.choices))
        allowed += [f"{v!r} = {c!r}" for v, c in (meta.synonyms or {}).items()]
        for bound, word in ((meta.ge, ">="), (meta.gt, ">"), (meta.le, "<="), (meta.lt, "<")):
            if bound is not None:
                allowed.append(f"{word} {bound:g}")
        if f.name in old_keys:
            allowed.append("old key " + ", ".join(old_keys[f.name]))
        if meta.applies:
            allowed.append("read only when " + _conditions_text(meta.applies))
        where = f" ({'; '.join(allowed)})" if allowed else ""
        doc = f" — {meta.doc}" if meta.doc else ""
        lines.append(f"{f.name}: {_type_name(hints[f.name])}{default}{where}{doc}")
    return lines


def _conditions_text(applies: Mapping[str, Condition]) -> str:
    """An ``applies`` condition in words: ``generate = True and weighting in ('polynomial', 'exponential')``.

    Example:
        >>> _conditions_text({"generate": (True,), "weighting": ("polynomial", "exponential")})
        "generate = True and weighting in ('polynomial', 'exponential')"
        >>> _conditions_text({"dropout": Above(0)})
        'dropout > 0'
    """
    parts = [
        f"{name} {values!r}"
        if isinstance(values, (Above, Below))
        else f"{name} = {values[0]!r}"
        if len(values) == 1
        else f"{name} in {tuple(values)!r}"
        for name, values in applies.items()
    ]
    return " and ".join(parts)


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _string_problem(text: str) -> str | None:
    """Why a scenario string is not allowed (too long, a control character), or ``None``."""
    if len(text) > MAX_STRING_CHARS:
        return f"a string of {len(text):,} characters is too long; the limit is {MAX_STRING_CHARS:,}"
    bad = next((ch for ch in text if (ord(ch) < 32 and ch not in "\t\n") or ord(ch) == 127), None)
    if bad is not None:
        return f"contains the control character U+{ord(bad):04X}; remove it"
    return None


def _check_strings(value: Any, path: str, problems: list[str]) -> None:
    """Record a problem for each bad string (keys too) and each TOML date or time below ``value``.

    Strings are checked by :func:`_string_problem`; dates are refused because a run writes its scenario
    back, and JSON and Parquet hold no dates.
    """
    if isinstance(value, (datetime.date, datetime.time)):
        problems.append(f"{path}: {value.isoformat()} is a TOML date or time; write it as a string in quotes")
    elif isinstance(value, str):
        why = _string_problem(value)
        if why:
            problems.append(f"{path}: {why}")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and (why := _string_problem(k)):
                problems.append(f"{path}: key {k[:40]!r}: {why}")
            else:
                _check_strings(v, f"{path}.{k}", problems)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_strings(v, f"{path}[{i}]", problems)


def _nonfinite(value: Any) -> float | None:
    """The first NaN or infinite float in ``value`` (a number or a list of them), else ``None``."""
    for v in value if isinstance(value, (tuple, list)) else (value,):
        if isinstance(v, float) and not math.isfinite(v):
            return v
    return None


def _convert(value: Any, tp: Any, path: str, problems: list[str]) -> Any:
    """Check ``value`` against the annotation ``tp`` (ints widen to floats); record a problem if wrong."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            problems.append(f"{path}: expected a table of options, got {short_repr(value)}")
            return None
        return _build(tp, value, path, problems)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            trial: list[str] = []
            out = _convert(value, arg, path, trial)
            if not trial:
                return out
        problems.append(f"{path}: expected {_type_name(tp)}, got {short_repr(value)}")
        return None
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            problems.append(f"{path}: expected a list, got {short_repr(value)}")
            return None
        args = typing.get_args(tp)
        elem = args[0] if args else Any
        items = [_convert(v, elem, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            problems.append(f"{path}: expected a table, got {short_repr(value)}")
            return None
        _check_strings(value, path, problems)
        return dict(value)
    if tp is Any:
        _check_strings(value, path, problems)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{path}: expected a number, got {short_repr(value)}")
            return None
        return float(value)
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{path}: expected an integer, got {short_repr(value)}")
            return None
        if not -(2**63) <= value < 2**63:  # what TOML, numpy and Arrow hold
            problems.append(f"{path}: {short_repr(value)} is out of range; it must fit in 64 bits (< 2**63)")
            return None
        return value
    if tp is bool:
        if not isinstance(value, bool):
            problems.append(f"{path}: expected true or false, got {short_repr(value)}")
            return None
        return value
    if tp is str:
        if not isinstance(value, str):
            problems.append(f"{path}: expected a string, got {short_repr(value)}")
            return None
        why = _string_problem(value)
        if why:
            problems.append(f"{path}: {why}")
            return None
        return value
    return value


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 50 MB string must not flood the terminal)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "…" + text[-4:]


def _check_bounds(value: Any, meta: OptionMeta, path: str, problems: list[str]) -> None:
    if meta.choices is not None and value not in meta.choices:
        allowed = ", ".join(repr(c) for c in meta.choices)
        problems.append(f"{path}: {short_repr(value)} is not allowed; choose one of {allowed}")
        return
    if meta.check is not None:
        why = meta.check(value)
        if why:
            problems.append(f"{path}: {short_repr(value)} {why}")
            return
    values = value if isinstance(value, (tuple, list)) else (value,)
    for v in values:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        for bound, op, word in (
            (meta.ge, lambda a, b: a >= b, ">="),
            (meta.gt, lambda a, b: a > b, ">"),
            (meta.le, lambda a, b: a <= b, "<="),
            (meta.lt, lambda a, b: a < b, "<"),
        ):
            if bound is not None and not op(v, bound):
                problems.append(f"{path}: {v!r} is out of range; it must be {word} {bound:g}")
                return


def _build(cls: type[T], data: Mapping[str, Any], path: str, problems: list[str]) -> T | None:
    start = len(problems)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    renamed = key_aliases(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{path}.{key}" if path else key
        name = renamed.get(key, key)
        if name != key and name in data:
            other = f"{path}.{name}" if path else name
            problems.append(
                f"{where} and {other} name the same option ({key!r} is the old name of {name!r}); "
                f"give only {name!r}"
            )
            continue
        if name not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (valid keys: {', '.join(fields)})"
            problems.append(f"{where}: unknown key{hint}")
            continue
        before = len(problems)
        converted = _convert(value, hints[name], where, problems)
        bad = _nonfinite(converted) if len(problems) == before else None
        default = fields[name].default
        if bad is not None and converted != default:  # a non-finite default (-inf: unset) may be restated
            unset = f" (or {default!r}, its default)" if _nonfinite(default) is not None else ""
            problems.append(f"{where}: {bad!r} is not allowed; give a finite number{unset}")
        meta = option_meta(fields[name])
        if len(problems) == before and meta.synonyms and isinstance(converted, (str, int, float)):
            converted = meta.synonyms.get(converted, converted)
        if len(problems) == before:
            _check_bounds(converted, meta, where, problems)
        if len(problems) == before:
            kwargs[name] = converted
    given = {renamed.get(key, key) for key in data}
    for name, f in fields.items():
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if no_default and name not in given:
            problems.append(
                f"{path}.{name}: required key is missing" if path else f"{name}: required key is missing"
            )
    if len(problems) > start:
        return None
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        problems.append(f"{path or cls.__name__}: {err}")
        return None


def default_problems(cls: type) -> list[str]:
    """What is wrong with the defaults a dataclass of options declares.

    Each default is checked as :func:`build` checks a given value: an annotation that names nothing, a
    default of another type, out of range or not among ``choices``, a NaN. A method's defaults are not
    given by the user, so without this a bad one would run unchecked. An ``applies`` condition must name
    a sibling field, with values among that field's ``choices`` when it has them.
    """
    try:
        hints = typing.get_type_hints(cls)
    except Exception as err:  # noqa: BLE001 - whatever resolving an annotation raises, said as a problem
        return [f"{cls.__qualname__}: an annotation cannot be resolved ({type(err).__name__}: {err})"]
    problems: list[str] = _applies_problems(cls)
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING:
            if dataclasses.is_dataclass(hints.get(f.name)) and f.default_factory is not dataclasses.MISSING:
                problems += [f"{cls.__qualname__}.{f.name}.{p}" for p in default_problems(hints[f.name])]
            continue
        where, value = f"{cls.__qualname__}.{f.name} (default)", f.default
        before = len(problems)
        converted = _convert(value, hints[f.name], where, problems)
        if len(problems) > before:
            continue
        if hints[f.name] is int and isinstance(value, float):
            problems.append(f"{where}: expected an integer, got {short_repr(value)}")
        elif any(isinstance(v, float) and math.isnan(v) for v in _elements(converted)):
            problems.append(f"{where}: nan is not allowed; give a number")
        else:
            _check_bounds(converted, option_meta(f), where, problems)
    return problems


def _applies_problems(cls: type) -> list[str]:
    """``applies`` conditions of ``cls``'s options that name no sibling or a value it never takes."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    problems = []
    for f in fields.values():
        for other, allowed in (option_meta(f).applies or {}).items():
            where = f"{cls.__qualname__}.{f.name} (applies)"
            if other not in fields or other == f.name:
                problems.append(f"{where}: {other!r} is not another option of {cls.__qualname__}")
                continue
            sibling = fields[other]
            if isinstance(allowed, (Above, Below)):
                number = isinstance(sibling.default, (int, float)) and not isinstance(sibling.default, bool)
                if not number:
                    problems.append(f"{where}: {other} is not a number; {allowed!r} cannot hold for it")
                continue
            choices = option_meta(sibling).choices
            if choices is None:
                continue
            stray = [v for v in allowed if v not in choices]
            if stray:
                problems.append(
                    f"{where}: {other} is never {short_repr(stray)}; it is one of {list(choices)}"
                )
    return problems


def _elements(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def build(cls: type[T], data: Mapping[str, Any], path: str = "") -> T:
    """Build the frozen dataclass ``cls`` from ``data``, raising one :class:`ConfigError` for all problems."""
    problems: list[str] = []
    out = _build(cls, data, path, problems)
    if problems or out is None:
        raise ConfigError(problems)
    return out


def parse_value(text: str) -> Any:
    """Parse the right-hand side of a ``key=value`` override as a TOML value, else keep it as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``dotted.key=value`` overrides to a nested mapping (in place) and return it."""
    problems = []
    for item in overrides:
        if "=" not in item:
            problems.append(f"override {item!r}: expected dotted.key=value")
            continue
        key, _, text = item.partition("=")
        parts = key.strip().split(".")
        if not all(parts):
            problems.append(f"override {item!r}: {key.strip()!r} is not a dotted key (like train.lr)")
            continue
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                problems.append(f"override {item!r}: {part!r} is not a table")
                break
            node = child
        else:
            node[parts[-1]] = parse_value(text.strip())
    if problems:
        raise ConfigError(problems)
    return data


def read_toml(path: str | Path, kind: str = "scenario") -> dict[str, Any]:
    """Read a TOML file; every way it can fail becomes a :class:`ConfigError` naming the file.

    At most :data:`MAX_FILE_BYTES` are read (``/dev/zero`` or a data file given by mistake must not fill
    the memory); the text must be UTF-8; a syntax error names the line. ``kind`` says what the file is
    (``"scenario"``, ``"sweep file"``) in the messages.
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        what = kind if kind.endswith("file") else f"{kind} file"
        raise ConfigError([f"{what} {p} not found"], source=str(p), kind=kind) from None
    except OSError as err:
        raise ConfigError([f"cannot read {p}: {err.strerror or err}"], source=str(p), kind=kind) from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(
            [f"{p} is larger than {MAX_FILE_BYTES >> 20} MiB; a {kind} is a small TOML text file"],
            source=str(p),
            kind=kind,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            [
                f"{p} is not a UTF-8 text file (byte {data[err.start]:#04x} at offset {err.start}); "
                f"a {kind} is a TOML text file"
            ],
            source=str(p),
            kind=kind,
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError([f"malformed TOML: {err}"], source=str(p), kind=kind) from None


def to_dict(obj: Any) -> Any:
    """A dataclass (nested) as plain dicts/lists, suitable for TOML or JSON output."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def toml_value(value: Any) -> str:
    """One value as TOML text: lists and tables inline, ``None`` as an empty string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if not (isinstance(value, float) and value != value) else "nan"
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if value is None:
        return '""'
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def dumps_toml(data: Mapping[str, Any], _prefix: str = "") -> str:
    """Write nested plain data as TOML: scalars first, then tables, then arrays of tables.

    Example:
        >>> print(dumps_toml({"seed": 1, "data": {"dataset": "mnist"}}).strip())
        seed = 1
        <BLANKLINE>
        [data]
        dataset = "mnist"
    """
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    arrays: list[tuple[str, list[Mapping[str, Any]]]] = []
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            arrays.append((key, value))
        else:
            lines.append(f"{key} = {toml_value(value)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, table in tables:
        name = f"{_prefix}{key}"
        body = dumps_toml(table, f"{name}.")
        out += body if body.startswith("\n[") else f"\n[{name}]\n" + body
    for key, rows in arrays:
        for row in rows:
            out += f"\n[[{_prefix}{key}]]\n" + dumps_toml(row, f"{_prefix}{key}.")
    return out
