"""Job params: validation against a job's params model, and what MongoDB can store.

An event job may declare a ``params_model``: a pydantic-like class (with ``model_validate`` and
``model_dump``) or a dataclass. When not given it is taken from the annotation of the handler's
first parameter if that is such a class. :func:`validate_params` turns what the caller passes into
the plain dict that is stored; :func:`load_params` turns the stored dict back into what the
handler receives. Without a model, params are ``None`` or a mapping with ``str`` keys whose values
MongoDB can store (checked by :func:`check_bson_storable`). Everything here is re-exported by
:mod:`dogs_core.domain.definitions`.

Integers are limited to the ones a JavaScript number holds exactly, +/-(2**53 - 1), by default:
a Node Dogs worker on the same collection reads a larger int64 as a ``Long`` object and fails on
it. A ``bson.Int64`` value is the explicit opt-out of a Python-only fleet and is stored as given.
A handler's result is checked the same way; one that fails is kept in history as its ``repr``
(see :mod:`dogs_core.domain.history`).

This module does not import the definitions (they import it): :func:`validate_params` and
:func:`load_params` take any object with the attributes they read, described by
:class:`ParamsModelJob` and :class:`NamedJob`, which every job definition satisfies.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeGuard

from dogs_core.domain.validation import (
    INT64_MAX,
    INT64_MIN,
    MAX_SAFE_INTEGER,
    is_node_safe_int,
)
from dogs_core.errors import InvalidParamsError

__all__ = [
    "MAX_PARAMS_BSON_SIZE",
    "NamedJob",
    "ParamsModelJob",
    "bson_document_size",
    "check_bson_storable",
    "derive_params_model",
    "is_params_model",
    "load_params",
    "to_bson_storable",
    "validate_params",
]

_MAX_BSON_DEPTH = 100
_AnyType = type[Any]
_AnyCallable = Callable[..., Any]


class NamedJob(Protocol):
    """What :func:`load_params` needs of a job definition: its name (and, read if present,
    its ``params_model``; a recurrent job has none)."""

    @property
    def name(self) -> str: ...


class ParamsModelJob(NamedJob, Protocol):
    """What :func:`validate_params` needs of an event job definition: its name and its
    ``params_model`` (None when params are a plain mapping)."""

    @property
    def params_model(self) -> type[Any] | None: ...


def is_params_model(obj: object) -> TypeGuard[type[Any]]:
    """True for a pydantic-like model class (``model_validate`` and ``model_dump``) or a
    dataclass class."""
    if not isinstance(obj, type):
        return False
    return _is_pydantic_like(obj) or dataclasses.is_dataclass(obj)


def _is_pydantic_like(model: type[Any]) -> bool:
    return callable(getattr(model, "model_validate", None)) and callable(
        getattr(model, "model_dump", None)
    )


def derive_params_model(handler: _AnyCallable) -> _AnyType | None:
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return None
    first = next(iter(signature.parameters.values()), None)
    if first is None or first.kind is inspect.Parameter.VAR_POSITIONAL:
        return None
    annotation: object = first.annotation
    if isinstance(annotation, str):
        try:
            annotation = typing.get_type_hints(handler).get(first.name)
        except Exception:  # unresolvable forward references: no model
            return None
    return annotation if is_params_model(annotation) else None


def validate_params(definition: ParamsModelJob, params: object) -> dict[str, Any] | None:
    """Validate ``params`` for an event job and return the plain dict to store (or None).

    With a ``params_model``, ``params`` may be a model instance or a mapping (None counts as an
    empty mapping); a mapping is validated (pydantic coerces, e.g. ``"10"`` becomes ``10``; a
    dataclass is just constructed) and the result dumped with ``model_dump(mode="python")`` or
    :func:`dataclasses.asdict`. Without one, params must be None or a mapping with str keys.
    Either way the stored value must be BSON-storable. Raises :class:`InvalidParamsError`.
    """
    model = definition.params_model
    job = definition.name
    data: object
    if model is not None:
        data = _dump_model(_build_model(model, params, job, stored=False), model, job)
    elif params is None:
        return None
    elif isinstance(params, Mapping):
        data = params
    else:
        raise InvalidParamsError(
            "params",
            params,
            f"job {job!r}: params must be a mapping with str keys, or None "
            f"(give the job a params_model to pass a {type(params).__name__})",
        )
    result = to_bson_storable(data, path="params", job=job)
    if not isinstance(result, dict):  # a model whose dump is not a document
        raise InvalidParamsError(
            "params", data, f"job {job!r}: params must serialize to a mapping, not {type(data)}"
        )
    size = bson_document_size(result)
    if size > MAX_PARAMS_BSON_SIZE:
        raise InvalidParamsError(
            "params",
            f"<{size} bytes as BSON>",
            f"job {job!r}: params exceed {MAX_PARAMS_BSON_SIZE} bytes; a MongoDB document holds "
            "at most 16 MiB with the record's own fields: store large data elsewhere and pass "
            "a reference",
        )
    return result


#: The largest params document: MongoDB's 16 MiB limit less room for the record's own fields.
MAX_PARAMS_BSON_SIZE = 16 * 1024 * 1024 - 16 * 1024


def bson_document_size(document: Mapping[str, Any]) -> int:
    """The size in bytes of ``document`` encoded as BSON (for values that pass
    :func:`check_bson_storable`), computed without encoding it."""
    return 5 + sum(_bson_element_size(str(key), value) for key, value in document.items())


def _bson_element_size(key: str, value: object) -> int:
    return 2 + len(key.encode("utf-8")) + _bson_value_size(value)


def _bson_value_size(value: object) -> int:
    if value is None or isinstance(value, bool):
        return 0 if value is None else 1
    if isinstance(value, int):
        return 4 if -(2**31) <= value < 2**31 else 8
    if isinstance(value, float | datetime):
        return 8
    if isinstance(value, str):
        return 5 + len(value.encode("utf-8"))
    if isinstance(value, bytes | bytearray):
        return 5 + len(value)
    if isinstance(value, uuid.UUID):
        return 5 + 16
    if isinstance(value, Mapping):
        return bson_document_size(value)
    if isinstance(value, list | tuple):
        return 5 + sum(_bson_element_size(str(i), item) for i, item in enumerate(value))
    return 16  # other BSON types (ObjectId 12, Decimal128 16...): an upper bound is enough


def load_params(definition: NamedJob, stored: Mapping[str, Any] | None) -> object:
    """What the handler receives for the ``stored`` params: a model instance when the job has a
    ``params_model`` (None counts as an empty mapping), else ``stored`` unchanged.

    Raises :class:`InvalidParamsError` when the stored params no longer fit the model.
    """
    model = getattr(definition, "params_model", None)  # a recurrent job has none
    if model is None:
        return stored
    return _build_model(model, stored, definition.name, stored=True)


def _build_model(model: _AnyType, params: object, job: str, *, stored: bool) -> object:
    if isinstance(params, model):
        return params
    what = "stored params" if stored else "params"
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise InvalidParamsError(
            "params",
            params,
            f"job {job!r}: expected a {model.__name__} or a mapping, not {type(params).__name__}",
        )
    source = dict(params)
    try:
        if _is_pydantic_like(model):
            return model.model_validate(source)
        return model(**source)
    except Exception as exc:
        raise InvalidParamsError(
            "params",
            params,
            f"job {job!r}: {what} do not match {model.__name__}: {exc}",
        ) from exc


def _dump_model(instance: object, model: _AnyType, job: str) -> object:
    if _is_pydantic_like(model):
        return typing.cast(Any, instance).model_dump(mode="python")
    return dataclasses.asdict(typing.cast(Any, instance))


def check_bson_storable(value: object, path: str = "params", *, job: str | None = None) -> None:
    """Raise :class:`InvalidParamsError` naming the path (``params.items[2].at``) of the first
    value that MongoDB cannot store.

    Accepted: None, bool, int within +/-(2**53 - 1) (what a Node worker reads as a number; a
    ``bson.Int64`` may use all 64 bits), float, str, bytes, aware datetime, uuid.UUID, values of
    ``bson`` types (ObjectId, Decimal128, ...), lists and tuples, and mappings whose keys are
    ``str`` without NUL characters and not starting with ``$``. Nesting is limited to 100 levels.
    Anything else (sets, dates without time, Decimal, arbitrary objects, naive datetimes) is
    rejected.
    """
    to_bson_storable(value, path=path, job=job)


def to_bson_storable(value: object, *, path: str = "params", job: str | None = None) -> Any:
    """Like :func:`check_bson_storable`, and return a plain copy (mappings become dicts,
    tuples become lists)."""
    return _storable(value, path, job, 0)


def _storable(value: object, path: str, job: str | None, depth: int) -> Any:
    if depth > _MAX_BSON_DEPTH:
        _not_storable(path, value, job, f"nested more than {_MAX_BSON_DEPTH} levels deep")
    if value is None or isinstance(value, bool | str | bytes | float | uuid.UUID):
        return value
    if isinstance(value, int):
        return _storable_int(value, path, job)
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            _not_storable(path, value, job, "naive datetimes are ambiguous; make it timezone-aware")
        return value
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            child = _checked_key(path, key, job)
            result[key] = _storable(item, child, job, depth + 1)
        return result
    if isinstance(value, list | tuple):
        return [_storable(item, f"{path}[{i}]", job, depth + 1) for i, item in enumerate(value)]
    if type(value).__module__.split(".")[0] == "bson":
        return value
    _not_storable(path, value, job, f"a {type(value).__name__} cannot be stored in MongoDB")


def _storable_int(value: int, path: str, job: str | None) -> int:
    """An int a Node worker reads as the same number (within ``validation.NODE_SAFE_INT_RANGE``), or
    a ``bson.Int64`` that fits 64 bits: the explicit choice of a Python-only fleet, stored as
    an int64 as given (pymongo also reads every stored int64 back as an ``Int64``, so such
    values round-trip). Anything else is refused, saying how to store it."""
    if _is_bson_int64(value):
        if not INT64_MIN <= value <= INT64_MAX:
            _not_storable(path, value, job, "a bson.Int64 must fit in 64 bits")
        return value
    if not is_node_safe_int(value):
        _not_storable(
            path,
            value,
            job,
            f"integers beyond +/-(2**53 - 1) = {MAX_SAFE_INTEGER} are not exact in JavaScript, "
            "and a Node worker cannot read them as numbers; store it as a string (str(n)), as "
            "a float if precision does not matter, or, for a fleet of Python workers only, "
            "as bson.Int64(n)",
        )
    return value


def _is_bson_int64(value: int) -> bool:
    """``bson.int64.Int64``, recognised without importing ``bson`` (the domain does not)."""
    kind = type(value)
    return kind.__name__ == "Int64" and kind.__module__.split(".")[0] == "bson"


def _child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


def _checked_key(path: str, key: object, job: str | None) -> str:
    """The path of the value under ``key``, once the key is one MongoDB can store."""
    prefix = f"job {job!r}: " if job is not None else ""
    if not isinstance(key, str):
        reason = f"{prefix}keys must be strings, not {type(key).__name__}"
        raise _key_error(path, key, reason, where=f"{path} key {key!r}")
    child = _child_path(path, key)
    if "\x00" in key:
        raise _key_error(child, key, f"{prefix}key not allowed: it contains a NUL character")
    if key.startswith("$"):
        reason = f"{prefix}key not allowed: it starts with '$' (MongoDB operators do)"
        raise _key_error(child, key, reason)
    return child


def _key_error(
    field: str, key: object, reason: str, *, where: str | None = None
) -> InvalidParamsError:
    """An :class:`InvalidParamsError` on ``field`` and ``key`` whose message is
    ``"{where}: {reason}"`` (``where`` defaults to ``field``): the usual ``field=value: reason``
    would show a key twice (``params['$x']='$x'``)."""
    return InvalidParamsError(field, key, reason, message=f"{where or field}: {reason}")


def _not_storable(path: str, value: object, job: str | None, reason: str) -> typing.NoReturn:
    prefix = f"job {job!r}: " if job is not None else ""
    raise InvalidParamsError(path, value, prefix + reason)
